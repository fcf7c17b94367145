#include <stddef.h>
typedef int dnnl_status_t;
typedef long dnnl_dim_t;
dnnl_status_t dnnl_sgemm(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N, dnnl_dim_t K,
                         float alpha, const float *A, dnnl_dim_t lda, const float *B,
                         dnnl_dim_t ldb, float beta, float *C, dnnl_dim_t ldc);
static char tr(char c) { return (c == 'N' || c == 'n') ? 'N' : 'T'; }
void sgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const float *alpha, const float *a, const int *lda, const float *b,
            const int *ldb, const float *beta, float *c, const int *ldc) {
    if (*m <= 0 || *n <= 0) return;
    dnnl_sgemm(tr(*tb), tr(*ta), *n, *m, *k, *alpha, b, *ldb, a, *lda, *beta, c, *ldc);
}
