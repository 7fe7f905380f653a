/* bench_tpool_idle — CPU a compute pool burns after a burst of work, with
 * and without tpool_quiesce (what --sleep-on-idle adds to the scheduler).
 *
 * DESIGN: a pool of --threads threads runs a burst of --ops tiny tasks (a
 * forward pass is a few hundred of them), then the driver sleeps --gap-ms
 * (the server waiting for the next request); repeated --bursts times.  Mode
 * "spin" leaves the workers to spin out SPIN_ITERS before they sleep;
 * "quiesce" calls tpool_quiesce right after the burst.  Reported: process
 * CPU (getrusage) per burst, minus the same loop's CPU with one thread
 * (the tasks themselves), i.e. the idle spin per burst, and the wall time
 * of the first task after the gap (the wake-up the quiesce mode pays).
 * JSON lines.  Validation: every task of every burst ran on every thread
 * (counted).
 *
 * Usage: build/bench/bench_tpool_idle [--threads N] [--bursts B] [--gap-ms G] [--ops K] */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "util/threadpool.h"
#include "util/timeutil.h"

static atomic_long g_count;

static void task(void *ctx, int ith, int nth)
{
    (void)ctx, (void)ith, (void)nth;
    atomic_fetch_add(&g_count, 1);
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (long)(ms / 1000)) * 1e6)};
    nanosleep(&ts, NULL);
}

/* CPU seconds per burst and the median first-task latency (us). */
static void run(int threads, bool quiesce, int bursts, double gap_ms, int ops, double *cpu_per, double *first_us)
{
    tpool *p = tpool_create(threads);
    if (!p) exit(1);
    atomic_store(&g_count, 0);
    double *lat = calloc((size_t)bursts, sizeof *lat);
    tpool_run(p, task, NULL); /* warm */
    sleep_ms(50);
    double c0 = cpu_now();
    for (int b = 0; b < bursts; b++) {
        double t0 = time_now_sec();
        tpool_run(p, task, NULL);
        lat[b] = (time_now_sec() - t0) * 1e6;
        for (int k = 1; k < ops; k++) tpool_run(p, task, NULL);
        if (quiesce) tpool_quiesce(p);
        sleep_ms(gap_ms);
    }
    *cpu_per = (cpu_now() - c0) / bursts;
    long want = (long)threads * (1 + (long)bursts * ops);
    if (atomic_load(&g_count) != want) {
        fprintf(stderr, "validation failed: %ld tasks, want %ld\n", atomic_load(&g_count), want);
        exit(1);
    }
    for (int i = 1; i < bursts; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && lat[j] < lat[j - 1]; j--) {
            double t = lat[j];
            lat[j] = lat[j - 1], lat[j - 1] = t;
        }
    *first_us = lat[bursts / 2];
    free(lat);
    tpool_destroy(p);
}

int main(int argc, char **argv)
{
    int threads = 2, bursts = 100, ops = 300;
    double gap = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bursts")) bursts = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gap-ms")) gap = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--ops")) ops = atoi(argv[i + 1]);
    }
    if (threads < 2 || bursts < 1 || ops < 1 || gap < 0) {
        fprintf(stderr, "usage: bench_tpool_idle [--threads N>=2] [--bursts B] [--gap-ms G] [--ops K]\n");
        return 2;
    }
    double base, lat1;
    run(1, false, bursts, gap, ops, &base, &lat1);
    for (int q = 0; q < 2; q++) {
        double cpu, lat;
        run(threads, q == 1, bursts, gap, ops, &cpu, &lat);
        printf("{\"mode\":\"%s\",\"threads\":%d,\"bursts\":%d,\"ops\":%d,\"gap_ms\":%g,\"cpu_ms_per_burst\":%.3f,"
               "\"idle_spin_ms_per_burst\":%.3f,\"first_task_us_median\":%.1f}\n",
               q ? "quiesce" : "spin", threads, bursts, ops, gap, cpu * 1e3, (cpu - base) * 1e3, lat);
    }
    return 0;
}
