/* Simulated <sys/proc_info.h>: the two structs with the SDK's field order,
 * so csrc/core/macos_proc.c's layout asserts hold here too. */
#pragma once
#include <stdint.h>
#include <sys/types.h>
#ifndef MAXCOMLEN
#define MAXCOMLEN 16
#endif

struct proc_bsdinfo {
    uint32_t pbi_flags, pbi_status, pbi_xstatus, pbi_pid, pbi_ppid;
    uid_t pbi_uid;
    gid_t pbi_gid;
    uid_t pbi_ruid;
    gid_t pbi_rgid;
    uid_t pbi_svuid;
    gid_t pbi_svgid;
    uint32_t rfu_1;
    char pbi_comm[MAXCOMLEN];
    char pbi_name[2 * MAXCOMLEN];
    uint32_t pbi_nfiles, pbi_pgid, pbi_pjobc, e_tdev, e_tpgid;
    int32_t pbi_nice;
    uint64_t pbi_start_tvsec, pbi_start_tvusec;
};

struct proc_bsdshortinfo {
    uint32_t pbsi_pid, pbsi_ppid, pbsi_pgid, pbsi_status;
    char pbsi_comm[MAXCOMLEN];
    uint32_t pbsi_flags;
    uid_t pbsi_uid;
    gid_t pbsi_gid;
    uid_t pbsi_ruid;
    gid_t pbsi_rgid;
    uid_t pbsi_svuid;
    gid_t pbsi_svgid;
    uint32_t pbsi_rfu;
};

#define PROC_FLAG_TRACED 2

#define PROC_PIDTBSDINFO 3
#define PROC_PIDT_SHORTBSDINFO 13
