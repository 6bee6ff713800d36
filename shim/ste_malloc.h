/*
 * The shared segment between ste's malloc shim (ste_malloc.c, loaded with LD_PRELOAD into the
 * command's processes) and ste (src/malloc/segment.rs mirrors this layout; both check
 * STE_MALLOC_MAGIC, STE_MALLOC_VERSION and the total size).
 *
 * One segment per process image: the shim creates `$STE_MALLOC_DIR/<pid>.<n>` (the first free
 * n) when it starts in a new image (exec) or in a forked child, maps it MAP_SHARED, and writes
 * its counters there; ste maps the same file and reads them with its samples, and once more
 * when the run ends (the file outlives the process).
 *
 * Every field is a 64-bit word, so both sides agree on the layout without padding rules, and
 * every word is written with a single (atomic on x86-64 and aarch64) store.
 */
#ifndef STE_MALLOC_H
#define STE_MALLOC_H

#include <stdint.h>

#define STE_MALLOC_MAGIC 0x314c4c414d455453ULL /* "STEMALL1" */
#define STE_MALLOC_VERSION 2
#define STE_SLOTS 1024
#define STE_INFO_CAP (256 * 1024)
#define STE_PATH_CAP 256

/* Counters of one thread (or of all retired threads, or of the threads beyond STE_SLOTS). Only
 * its thread writes it, with plain stores; the first cache line holds what malloc and free
 * touch (each slot starts on a line: the segment's header is padded to 64 bytes). Block sizes
 * are glibc's chunk sizes (the usable size plus malloc's 8 or 16 bytes of header),
 * mallinfo2()'s unit: what the thread holds is allocated − freed, its "net" (negative when it
 * frees blocks another thread allocated). */
struct ste_counters {
    uint64_t poll; /* set by ste: look at the segment's request on the next call */
    uint64_t malloc_calls;
    uint64_t malloc_bytes;          /* bytes asked for */
    uint64_t allocated_chunk_bytes; /* every block handed out, by any family */
    uint64_t free_calls;            /* free of a non-null pointer */
    uint64_t free_bytes;            /* chunk bytes given back by free and realloc */
    uint64_t peak_net; /* the most its net has been after any call (≥ 0, signed); in `retired`,
                        * the sum of the retired threads' */
    uint64_t flushed_net; /* its net when last added to the segment's `held_flushed` */
    /* Second line: the rarer families and paths. */
    uint64_t state; /* 0 free, 1 in use */
    uint64_t free_null_calls;
    uint64_t calloc_calls;
    uint64_t calloc_bytes;
    uint64_t realloc_calls;
    uint64_t realloc_bytes;
    uint64_t memalign_calls; /* memalign, posix_memalign, aligned_alloc, valloc, pvalloc */
    uint64_t memalign_bytes;
    uint64_t mmapped_calls; /* blocks glibc served with an mmap of their own */
    uint64_t mmapped_bytes;
    uint64_t failed_calls; /* an allocation that returned NULL */
    uint64_t flush_t_ns;   /* CLOCK_MONOTONIC of its last flush (or of its first call) */
    uint64_t flush_peak;   /* peak_net at its last flush */
    uint64_t reserved[3];
};

/* The last mallinfo2()/malloc_info() the shim took, under a sequence lock (odd: writing). */
struct ste_snapshot {
    uint64_t seq;
    uint64_t answered;  /* the request number this snapshot answers */
    uint64_t t_ns;      /* CLOCK_MONOTONIC when taken */
    uint64_t cost_ns;   /* thread CPU it cost the program */
    uint64_t at_exit;   /* taken by the shim's destructor */
    uint64_t arena;     /* mallinfo2 fields, in their order */
    uint64_t ordblks;
    uint64_t smblks;
    uint64_t hblks;
    uint64_t hblkhd;
    uint64_t usmblks;
    uint64_t fsmblks;
    uint64_t uordblks;
    uint64_t fordblks;
    uint64_t keepcost;
    uint64_t info_t_ns; /* when info[] was written; 0: never */
    uint64_t info_len;
    uint64_t info_truncated;
    char info[STE_INFO_CAP]; /* malloc_info() XML */
};

struct ste_segment {
    /* Written once by the shim; `magic` last. */
    uint64_t magic;
    uint64_t version;
    uint64_t size; /* sizeof(struct ste_segment) */
    int64_t pid;
    int64_t ppid;
    uint64_t created_ns; /* CLOCK_MONOTONIC */
    uint64_t origin;     /* 1: the program started (exec), 2: a forked child */
    uint64_t allocator;  /* 1: glibc, 2: a library after the shim, 3: the program's own */
    uint64_t inherited_bytes; /* a forked child: what it held when it got its segment */
    char exe[STE_PATH_CAP];        /* /proc/self/exe */
    char allocator_path[STE_PATH_CAP]; /* the object whose malloc is in use */
    /* The shim's model of glibc's thresholds (malloc.c: mallopt, the dynamic rule in free). */
    uint64_t mmap_threshold;
    uint64_t trim_threshold;
    uint64_t thresholds_dynamic; /* 1 until mallopt/environment fixes them */
    uint64_t threshold_changes;
    /* Written by ste: bump `request` for a mallinfo2() snapshot; set `request_full` to the
     * same number for a malloc_info() one too. Answered on the program's next call. */
    uint64_t request;
    uint64_t request_full;
    uint64_t exited; /* the shim's destructor ran (exit(), not _exit or a signal) */
    uint64_t fold_seq; /* odd while a thread's counters are folded into `retired` */
    uint64_t slots_high; /* slots[0..slots_high) may be in use */
    uint64_t threads;    /* threads that made a call */
    uint64_t overflow_threads; /* threads that found no free slot: they share `overflow` */
    uint64_t snapshots;        /* snapshots taken (ste's requests and the one at exit) */
    uint64_t snapshots_cost_ns; /* the thread CPU they cost the program, in all */
    uint64_t exit_snapshot_skipped; /* 1: the destructor skipped its snapshot (budget) */
    /* The high-water mark of what the image holds (the shim's, ste_malloc.c: "held peak").
     * Each thread adds its net's change to `held_flushed` (atomically) whenever the change
     * since its last addition exceeds `flush_bytes`, and at its end; `held_peak` is the most
     * `held_flushed` has been after an addition, and `held_peak_t_ns` when. The exact peak of a
     * single thread's net lies between `peak_after_ns` and `peak_by_ns` (its last two flushes
     * around the last rise of its peak_net). */
    uint64_t held_flushed;
    uint64_t held_peak;
    uint64_t held_peak_t_ns;
    uint64_t peak_after_ns;
    uint64_t peak_by_ns;
    uint64_t flush_bytes;
    uint64_t reserved[3]; /* pads the header to a multiple of 64 bytes */
    struct ste_counters retired;
    /* Threads beyond STE_SLOTS share this one without atomics: its counts are approximate
     * (ste says so when overflow_threads > 0). */
    struct ste_counters overflow;
    struct ste_counters slots[STE_SLOTS];
    struct ste_snapshot snap;
};

#endif
