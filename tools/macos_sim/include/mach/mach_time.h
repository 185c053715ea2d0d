/* Simulated <mach/mach_time.h>: mach_timebase_info, answered by sim_kernel.c. */
#pragma once
#include <stdint.h>

typedef int kern_return_t;

struct mach_timebase_info {
    uint32_t numer;
    uint32_t denom;
};
typedef struct mach_timebase_info *mach_timebase_info_t;

kern_return_t mach_timebase_info(mach_timebase_info_t info);
