/* tests/lib/cuda_skip.h: the device check of tests that call the CUDA runtime
 * themselves (pf_testlib_cuda, built where CUDA is). */
#ifndef PF_CUDA_SKIP_H
#define PF_CUDA_SKIP_H

/* 1 when the CUDA runtime sees a device; otherwise prints "<test>: skipped: <why>" and
   returns 0, and the test returns PF_TEST_SKIPPED. */
int pf_test_cuda_device(const char *test);

#endif
