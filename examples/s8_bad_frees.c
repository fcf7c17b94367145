/* s8_bad_frees.c — S8: a double free and a free of a pointer inside an allocation.
 *
 * Both calls fail with CUDA_ERROR_INVALID_VALUE; vramguard reports each with the
 * allocation, where it was allocated and (for the double free) first freed, and keeps
 * its allocator intact: the program goes on allocating.
 */
#include "common.h"

int main(void) {
    ex_init();
    CUdeviceptr a, b, c;
    CK(cuMemAlloc(&a, 4096));
    CK(cuMemAlloc(&b, 8192));
    CK(cuMemFree(a));
    CUresult twice = cuMemFree(a);     /* the first bug: a double free */
    CUresult inner = cuMemFree(b + 256); /* the second: not the pointer cuMemAlloc returned */
    CK(cuMemAlloc(&c, 4096));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    printf("s8: double free %s, interior free %s\n", twice ? "rejected" : "accepted",
           inner ? "rejected" : "accepted");
    return 0;
}
