/* What the simulation's test files share: the check that ends the run, and each file's entry point. */
#pragma once
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* sim_test_facts.c: pt_facts, pt_facts_scan and pt_facts_table against the simulated kernel. */
void test_facts(void);
