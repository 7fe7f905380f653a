/* chi2_two_sample.h — the two-sample chi-square homogeneity test the
 * speculative-decoding tests use to compare sampled token histograms
 * (test_spec.c, test_spec_eagle.c).
 *
 * Bins: tokens seen >= 10 times in both samples together; the rest pooled
 * into 8 groups by token id (a fixed partition: the test stays a two-sample
 * homogeneity test); groups below 10 pooled once more.  Equal sample sizes. */
#ifndef SGLC_TEST_CHI2_TWO_SAMPLE_H
#define SGLC_TEST_CHI2_TWO_SAMPLE_H

#include <math.h>

/* The statistic of histograms ca, cb over V ids; *bins = its bin count. */
static inline double chi2_two_sample(const int *ca, const int *cb, int V, int *bins)
{
    double chi = 0, oa[9] = {0}, ob[9] = {0};
    *bins = 0;
    for (int t = 0; t < V; t++) {
        int tot = ca[t] + cb[t];
        if (tot < 10) {
            oa[t % 8] += ca[t], ob[t % 8] += cb[t];
            continue;
        }
        double e = tot / 2.0; /* equal sample sizes */
        chi += (ca[t] - e) * (ca[t] - e) / e + (cb[t] - e) * (cb[t] - e) / e;
        (*bins)++;
    }
    for (int g = 0; g <= 8; g++) {
        if (g < 8 && oa[g] + ob[g] < 10) {
            oa[8] += oa[g], ob[8] += ob[g];
            continue;
        }
        if (g == 8 && oa[8] + ob[8] < 10) break;
        double e = (oa[g] + ob[g]) / 2.0;
        chi += (oa[g] - e) * (oa[g] - e) / e + (ob[g] - e) * (ob[g] - e) / e;
        (*bins)++;
    }
    return chi;
}

/* Wilson-Hilferty: the chi-square quantile for df degrees of freedom at
 * upper tail probability given by the normal quantile z. */
static inline double chi2_quantile(int df, double z)
{
    double h = 2.0 / (9.0 * df);
    double c = 1.0 - h + z * sqrt(h);
    return df * c * c * c;
}

#endif
