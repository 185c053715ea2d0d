/* Simulated <sys/proc_info.h>: the structs csrc/core/macos_*.c and facts_macos_row.c read, with the SDK's
 * field order and sizes (fields nobody reads are opaque bytes), so the core's layout asserts hold here too. */
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

/* MAXPATHLEN as Darwin has it (glibc's sys/param.h says 4096: not included here). */
#ifndef MAXPATHLEN
#define MAXPATHLEN 1024
#endif

struct proc_taskinfo {
    uint64_t pti_virtual_size, pti_resident_size; /* bytes */
    uint64_t pti_total_user, pti_total_system;    /* Mach absolute time units */
    uint64_t pti_threads_user, pti_threads_system;
    int32_t pti_policy, pti_faults, pti_pageins, pti_cow_faults, pti_messages_sent, pti_messages_received;
    int32_t pti_syscalls_mach, pti_syscalls_unix, pti_csw, pti_threadnum, pti_numrunning, pti_priority;
};

struct proc_taskallinfo {
    struct proc_bsdinfo pbsd;
    struct proc_taskinfo ptinfo;
};

struct vnode_info {
    char vi_stat[136]; /* struct vinfo_stat */
    int vi_type, vi_pad;
    int32_t vi_fsid[2];
};

struct vnode_info_path {
    struct vnode_info vip_vi;
    char vip_path[MAXPATHLEN];
};

struct proc_vnodepathinfo {
    struct vnode_info_path pvi_cdir, pvi_rdir;
};

#define PROC_FLAG_TRACED 2

#define PROC_PIDTASKALLINFO 2
#define PROC_PIDTBSDINFO 3
#define PROC_PIDTASKINFO 4
#define PROC_PIDVNODEPATHINFO 9
#define PROC_PIDPATHINFO_MAXSIZE (4 * MAXPATHLEN)
#define PROC_PIDT_SHORTBSDINFO 13
