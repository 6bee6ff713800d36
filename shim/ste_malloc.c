/*
 * ste's malloc shim: loaded with LD_PRELOAD into every process of the command's tree under
 * `ste --malloc`. It forwards every call of the malloc family to the allocator that would
 * have served it (found with dlsym(RTLD_NEXT): glibc's, unless a library after the shim
 * brings its own) and counts calls, bytes asked for, block bytes handed out and given back,
 * and blocks glibc served with mmap, in a segment shared with ste (ste_malloc.h). When ste asks
 * (a flag in each thread's counters), the thread's next call takes a mallinfo2() snapshot,
 * and a malloc_info() one when asked for; the destructor takes a last one at exit.
 *
 * Cost per call: 20 to 30 instructions on the fast paths of malloc and of free (see
 * `objdump -d` of the built object) — the thread's counters' pointer (a thread-local), two or
 * three adds to the thread's counters (the first 64 bytes of its slot, which also hold ste's
 * flag), one load of the block's header, on the line the program is about to use (malloc)
 * or glibc reads next (free), and the held peak's bookkeeping on the same line (malloc: a
 * compare and a store of the thread's running maximum; both: a subtract, an add and a compare
 * to see whether the thread's holdings moved enough to be added to the shared count, below).
 * No lock, no atomic read-modify-write; anything rarer (a thread's first call, an mmapped
 * block, a failure, a snapshot, a flush of the shared count, an allocator other than glibc's)
 * leaves the fast path. malloc counts before it calls glibc's, and free ends in a tail call to
 * glibc's (or to its rare path, which forwards the free itself), so neither keeps more than
 * one register across a call. bench/memory.sh measures it per malloc + free against bare and
 * against what any LD_PRELOAD interposer pays (bench/malloc_floor.c). What the program holds
 * is exact at any moment: chunk bytes handed out minus given back; its peak is exact for an
 * image whose calls all come from one thread, and bounded otherwise ("the held peak").
 *
 * The block header is read as glibc lays it out (malloc/malloc.c: the size word before the
 * block, IS_MMAPPED = 2); block sizes are chunk sizes, mallinfo2()'s unit. The
 * mmap/trim thresholds are modelled from glibc's rules (mallopt and the environment fix them;
 * otherwise free() of an mmapped block larger than the threshold, up to 32 MiB, raises it to
 * that size and the trim threshold to twice that), the rule behind glibc's
 * memory_mallopt_free_dyn_thresholds probe. With another allocator, calls and
 * malloc_usable_size() bytes are counted on the slow path and nothing glibc-specific is read.
 */
#define _GNU_SOURCE
#include "ste_malloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define COLD __attribute__((noinline, cold))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

_Static_assert(sizeof(struct ste_counters) == 24 * 8, "counters layout");
_Static_assert(offsetof(struct ste_counters, flushed_net) < 64, "hot counters");
_Static_assert(offsetof(struct ste_counters, failed_calls) == 18 * 8, "counters layout");
_Static_assert(offsetof(struct ste_segment, exe) == 9 * 8, "segment layout");
_Static_assert(offsetof(struct ste_segment, retired) % 64 == 0, "slots start on a cache line");

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* Until the allocator is resolved, the hot four point at these, which resolve it first: the
 * fast paths then need no check. */
static void *first_malloc(size_t n);
static void first_free(void *p);
static void *first_calloc(size_t k, size_t n);
static void *first_realloc(void *p, size_t n);

/* The allocator calls are forwarded to. */
static void *(*next_malloc)(size_t) = first_malloc;
static void (*next_free)(void *) = first_free;
static void *(*next_calloc)(size_t, size_t) = first_calloc;
static void *(*next_realloc)(void *, size_t) = first_realloc;
static void *(*next_memalign)(size_t, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static void *(*next_valloc)(size_t);
static void *(*next_pvalloc)(size_t);
static int (*next_mallopt)(int, int);
static size_t (*next_usable)(void *);
static int resolved;
static int resolving;
static int is_glibc = 1;

static struct ste_segment *seg;
/* A forked child gets a segment on its first call (most children exec at once, and an exec'd
 * program makes its own): these carry the parent's state until then. */
static int fork_pending;
static uint64_t fork_allocator;
static char fork_allocator_path[STE_PATH_CAP];
static uint64_t fork_thresholds[3];
static uint64_t fork_held;
static pthread_key_t slot_key;
static int slot_key_ok;
static int snap_lock;
static int fold_lock;

/* This thread's counters when glibc is the allocator (the fast path); NULL until its first
 * call, and while the shim does its own work. */
static TLS struct ste_counters *my;
/* This thread's counters in every case (the slow path's). */
static TLS struct ste_counters *mine;
/* Inside the shim's own work (snapshots, claiming a slot): forward without counting. */
static TLS int busy;
/* This thread has been counted in the segment's `threads`. */
static TLS int counted_thread;

static void enter(void) {
    if (busy++ == 0)
        my = NULL;
}

static void leave(void) {
    if (--busy == 0 && is_glibc)
        my = mine;
}

static uint64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Finds the allocator the calls would have gone to. dlsym only allocates on an error, and
 * these names all exist in glibc; what it might allocate meanwhile comes from glibc. */
static void resolve(void) {
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&resolving, 1, __ATOMIC_RELEASE);
    void *(*m)(size_t) = dlsym(RTLD_NEXT, "malloc");
    void (*f)(void *) = dlsym(RTLD_NEXT, "free");
    void *(*c)(size_t, size_t) = dlsym(RTLD_NEXT, "calloc");
    void *(*r)(void *, size_t) = dlsym(RTLD_NEXT, "realloc");
    next_memalign = dlsym(RTLD_NEXT, "memalign");
    next_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    next_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    next_valloc = dlsym(RTLD_NEXT, "valloc");
    next_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    next_mallopt = dlsym(RTLD_NEXT, "mallopt");
    next_usable = dlsym(RTLD_NEXT, "malloc_usable_size");
    if (!m || !f || !c || !r) {
        m = __libc_malloc;
        f = __libc_free;
        c = __libc_calloc;
        r = __libc_realloc;
    }
    if (!next_memalign)
        next_memalign = __libc_memalign;
    is_glibc = m == __libc_malloc;
    __atomic_store_n(&next_malloc, m, __ATOMIC_RELEASE);
    __atomic_store_n(&next_free, f, __ATOMIC_RELEASE);
    __atomic_store_n(&next_calloc, c, __ATOMIC_RELEASE);
    __atomic_store_n(&next_realloc, r, __ATOMIC_RELEASE);
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

static void *first_malloc(size_t n) {
    if (__atomic_load_n(&resolving, __ATOMIC_ACQUIRE))
        return __libc_malloc(n);
    resolve();
    return next_malloc(n);
}

static void first_free(void *p) {
    if (__atomic_load_n(&resolving, __ATOMIC_ACQUIRE)) {
        __libc_free(p);
        return;
    }
    resolve();
    next_free(p);
}

static void *first_calloc(size_t k, size_t n) {
    if (__atomic_load_n(&resolving, __ATOMIC_ACQUIRE))
        return __libc_calloc(k, n);
    resolve();
    return next_calloc(k, n);
}

static void *first_realloc(void *p, size_t n) {
    if (__atomic_load_n(&resolving, __ATOMIC_ACQUIRE))
        return __libc_realloc(p, n);
    resolve();
    return next_realloc(p, n);
}

/* ---- counters ---- */

static struct ste_counters *claim(void) {
    struct ste_counters *c = NULL;
    for (uint64_t i = 0; i < STE_SLOTS; i++) {
        uint64_t free_state = 0;
        if (__atomic_load_n(&seg->slots[i].state, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&seg->slots[i].state, &free_state, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            c = &seg->slots[i];
            uint64_t high = __atomic_load_n(&seg->slots_high, __ATOMIC_RELAXED);
            while (high < i + 1 &&
                   !__atomic_compare_exchange_n(&seg->slots_high, &high, i + 1, 0,
                                                __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            }
            break;
        }
    }
    if (!c) {
        c = &seg->overflow;
        __atomic_fetch_add(&seg->overflow_threads, 1, __ATOMIC_RELAXED);
    }
    /* A reused slot was emptied at its last thread's end, but for its own words. */
    c->flush_peak = c->peak_net;
    c->flush_t_ns = now_ns(CLOCK_MONOTONIC);
    if (!counted_thread) {
        /* A thread may claim again after its slot was folded (late calls at its exit). */
        counted_thread = 1;
        __atomic_fetch_add(&seg->threads, 1, __ATOMIC_RELAXED);
    }
    if (slot_key_ok && c != &seg->overflow) {
        /* It may allocate (keys past the first 32): not counted. */
        enter();
        pthread_setspecific(slot_key, c);
        leave();
    }
    mine = c;
    if (is_glibc)
        my = c;
    return c;
}

static void attach_forked(void);

/* The slow path's counters: this thread's, claiming a slot on its first call; NULL when the
 * shim has no segment or is doing its own work. */
static struct ste_counters *slow_counters(void) {
    if (busy)
        return NULL;
    if (UNLIKELY(fork_pending))
        attach_forked();
    if (!seg)
        return NULL;
    return mine ? mine : claim();
}

static const uint64_t COUNTER_WORDS = sizeof(struct ste_counters) / 8;

/* The words of a thread's counters that stay its own when they are folded into `retired`: ste's
 * flag, the slot's state, and its flush bookkeeping. The rest add up (peak_net too: a sum of
 * the threads' peaks bounds the image's). */
static int own_word(uint64_t i) {
    size_t at = i * 8;
    return at == offsetof(struct ste_counters, poll) ||
           at == offsetof(struct ste_counters, state) ||
           at == offsetof(struct ste_counters, flush_t_ns) ||
           at == offsetof(struct ste_counters, flush_peak);
}

/* ---- the held peak ----
 *
 * What the image holds is the sum of its threads' nets (plus what a forked child inherited).
 * Each thread keeps the running maximum of its own net (`peak_net`: one compare and a store on
 * the line malloc already writes), which for an image whose every call came from one thread is
 * its exact peak. Threads' peaks do not add up to the image's (one thread's may come while
 * another's net is low or negative: a consumer freeing what a producer allocated), and a
 * shared counter updated at every call would make every malloc of every thread a locked
 * read-modify-write on one cache line, contended between cores. So each thread adds its
 * net's change to the shared `held_flushed` only once it has moved more than FLUSH_BYTES
 * either way since its last addition (and at its end), and `held_peak` keeps the most that
 * has been. With n threads live at most at once, at any moment held_flushed is within n ×
 * FLUSH_BYTES of the truth, which bounds the image's peak from both sides (ste: malloc/mod.rs). */
#define FLUSH_BYTES (64u * 1024)

/* Whether this thread's net has moved more than FLUSH_BYTES since its last flush (unsigned:
 * one add and one compare for both directions). */
static inline int held_moved(const struct ste_counters *c, uint64_t net) {
    return net - c->flushed_net + FLUSH_BYTES > 2 * (uint64_t)FLUSH_BYTES;
}

/* Raises this thread's peak to its net, if above. */
static inline void note_peak(struct ste_counters *c, uint64_t net) {
    if ((int64_t)net > (int64_t)c->peak_net)
        c->peak_net = net;
}

/* Adds this thread's change since its last flush to the shared account, raising its high-water
 * mark. Also dates the thread's peak: if peak_net rose since its last flush, it rose between
 * that flush and now, which for a single-threaded image is where the peak lies. */
static COLD void flush(struct ste_counters *c) {
    if (!seg)
        return;
    uint64_t net = c->allocated_chunk_bytes - c->free_bytes;
    uint64_t delta = net - c->flushed_net;
    c->flushed_net = net;
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    if (c->peak_net != c->flush_peak) {
        __atomic_store_n(&seg->peak_after_ns, c->flush_t_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&seg->peak_by_ns, now, __ATOMIC_RELAXED);
        c->flush_peak = c->peak_net;
    }
    c->flush_t_ns = now;
    uint64_t held = __atomic_add_fetch(&seg->held_flushed, delta, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&seg->held_peak, __ATOMIC_RELAXED);
    while ((int64_t)held > (int64_t)peak) {
        if (__atomic_compare_exchange_n(&seg->held_peak, &peak, held, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&seg->held_peak_t_ns, now, __ATOMIC_RELAXED);
            break;
        }
    }
}

/* After the slow paths' updates: the peak, and a flush if due. */
static void account(struct ste_counters *c) {
    uint64_t net = c->allocated_chunk_bytes - c->free_bytes;
    note_peak(c, net);
    if (held_moved(c, net))
        flush(c);
}

/* A thread ended: fold its counters into `retired` and free its slot. */
static void retire(void *p) {
    struct ste_counters *c = p;
    if (!seg || c < &seg->slots[0] || c >= &seg->slots[STE_SLOTS])
        return;
    /* Its last change joins the shared account first: a retired thread leaves nothing
     * unflushed, so the bound counts only live slots. */
    flush(c);
    while (__atomic_exchange_n(&fold_lock, 1, __ATOMIC_ACQUIRE))
        ;
    __atomic_fetch_add(&seg->fold_seq, 1, __ATOMIC_RELEASE);
    uint64_t *from = (uint64_t *)c, *to = (uint64_t *)&seg->retired;
    for (uint64_t i = 0; i < COUNTER_WORDS; i++) {
        if (own_word(i))
            continue;
        __atomic_store_n(&to[i], to[i] + from[i], __ATOMIC_RELAXED);
        __atomic_store_n(&from[i], 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&c->poll, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->state, 0, __ATOMIC_RELEASE);
    __atomic_fetch_add(&seg->fold_seq, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&fold_lock, 0, __ATOMIC_RELEASE);
    if (mine == c)
        mine = my = NULL;
}

/* ---- glibc's block header and thresholds ---- */

#define IS_MMAPPED 2
#define SIZE_BITS ((size_t)7)
#define DEFAULT_MMAP_THRESHOLD_MAX (32u * 1024 * 1024)

static inline size_t header(void *p) {
    return ((size_t *)p)[-1];
}

static void snapshot(int at_exit);

/* The rare outcomes of an allocation: it failed, glibc mmapped it, or ste asked for a
 * snapshot. Returns `p`, so callers can tail-call it. */
static COLD void *alloc_rare(struct ste_counters *c, void *p, size_t asked, size_t hdr) {
    if (!p) {
        if (asked)
            c->failed_calls++;
    } else if (hdr & IS_MMAPPED) {
        c->mmapped_calls++;
        c->mmapped_bytes += hdr & ~SIZE_BITS;
    }
    account(c);
    if (c->poll) {
        c->poll = 0;
        snapshot(0);
    }
    return p;
}

/* Counts a block handed out by any family and allocator. */
static inline void *counted(struct ste_counters *c, void *p, size_t asked) {
    if (LIKELY(p != NULL) && LIKELY(is_glibc)) {
        size_t hdr = header(p);
        uint64_t net = (c->allocated_chunk_bytes += hdr & ~SIZE_BITS) - c->free_bytes;
        note_peak(c, net);
        if (UNLIKELY((hdr & IS_MMAPPED) | c->poll | held_moved(c, net)))
            return alloc_rare(c, p, asked, hdr);
        return p;
    }
    if (p && next_usable)
        c->allocated_chunk_bytes += next_usable(p);
    return alloc_rare(c, p, asked, 0);
}

/* glibc's __libc_free: the dynamic threshold follows the largest mmapped block freed. */
static COLD void freed_mmapped(size_t hdr) {
    if (seg->thresholds_dynamic &&
        hdr > __atomic_load_n(&seg->mmap_threshold, __ATOMIC_RELAXED) &&
        hdr <= DEFAULT_MMAP_THRESHOLD_MAX) {
        __atomic_store_n(&seg->mmap_threshold, hdr & ~SIZE_BITS, __ATOMIC_RELAXED);
        __atomic_store_n(&seg->trim_threshold, 2 * (hdr & ~SIZE_BITS), __ATOMIC_RELAXED);
        __atomic_fetch_add(&seg->threshold_changes, 1, __ATOMIC_RELAXED);
    }
}

/* Bytes of a block about to be given back, by any allocator. */
static size_t block_bytes(void *p) {
    if (!p)
        return 0;
    if (is_glibc)
        return header(p) & ~SIZE_BITS;
    return next_usable ? next_usable(p) : 0;
}

/* ---- snapshots ---- */

/* What the pacing of snapshots reads of the counters, summed over the threads (plain reads of
 * counters other threads may be writing: an estimate, not a figure): frees and reallocs (each
 * can add at most one free chunk for mallinfo2() to walk), and chunk bytes held. */
struct pace_counts {
    uint64_t frees;
    uint64_t held;
};

static void add_pace(struct pace_counts *p, const struct ste_counters *c) {
    p->frees += __atomic_load_n(&c->free_calls, __ATOMIC_RELAXED) +
                __atomic_load_n(&c->realloc_calls, __ATOMIC_RELAXED);
    p->held += __atomic_load_n(&c->allocated_chunk_bytes, __ATOMIC_RELAXED) -
               __atomic_load_n(&c->free_bytes, __ATOMIC_RELAXED);
}

static struct pace_counts pace_counts(void) {
    struct pace_counts p = {0, 0};
    add_pace(&p, &seg->retired);
    add_pace(&p, &seg->overflow);
    uint64_t high = __atomic_load_n(&seg->slots_high, __ATOMIC_RELAXED);
    for (uint64_t i = 0; i < high && i < STE_SLOTS; i++)
        add_pace(&p, &seg->slots[i]);
    return p;
}

/* Frees and reallocs when the last snapshot was taken; the dearest cost per free chunk measured
 * (0: none on a heap of at least CHUNKS_TO_MEASURE free chunks). */
static uint64_t frees_at_snapshot;
static double per_chunk_ns;
#define CHUNKS_TO_MEASURE 10000
/* mallinfo2() per free chunk until measured: a heap that fits the cache is walked at tens of ns
 * a chunk; a larger one misses it at every chunk (perl's fragmented heap: bench/README.md).
 * src/malloc/mod.rs assumes the same before its requests. */
#define PER_CHUNK_CACHED_NS 20.0
#define PER_CHUNK_NS 400.0
#define CACHED_HEAP_BYTES (32ull << 20)

static void snapshot(int at_exit) {
    if (!seg || busy || __atomic_exchange_n(&snap_lock, 1, __ATOMIC_ACQUIRE))
        return;
    uint64_t request = __atomic_load_n(&seg->request, __ATOMIC_ACQUIRE);
    if (!at_exit && request == __atomic_load_n(&seg->snap.answered, __ATOMIC_RELAXED)) {
        __atomic_store_n(&snap_lock, 0, __ATOMIC_RELEASE);
        return;
    }
    enter();
    /* At exit, malloc_info() only when there may be arenas besides the main one (threads, or
     * a fork that inherited its parent's): in a program that ran one thread, mallinfo2()
     * describes the main arena entirely, and most exiting images are short single-threaded
     * programs, for which fmemopen and malloc_info would double the shim's cost. */
    int full = __atomic_load_n(&seg->request_full, __ATOMIC_RELAXED) == request ||
               (at_exit && (__atomic_load_n(&seg->threads, __ATOMIC_RELAXED) > 1 ||
                            seg->origin != 1));
    uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    struct ste_snapshot *s = &seg->snap;
    if (is_glibc) {
        struct mallinfo2 mi = mallinfo2();
        size_t len = 0;
        int truncated = 0;
        /* malloc_info writes to a FILE; fmemopen's own allocations are not counted (busy). */
        static char xml[STE_INFO_CAP];
        FILE *f = full ? fmemopen(xml, sizeof xml, "w") : NULL;
        if (f) {
            malloc_info(0, f);
            fflush(f);
            long at = ftell(f);
            fclose(f);
            len = at > 0 ? (size_t)at : 0;
            if (len >= sizeof xml - 1) {
                len = sizeof xml - 1;
                truncated = 1;
            }
        }
        __atomic_fetch_add(&s->seq, 1, __ATOMIC_ACQ_REL);
        s->arena = mi.arena;
        s->ordblks = mi.ordblks;
        s->smblks = mi.smblks;
        s->hblks = mi.hblks;
        s->hblkhd = mi.hblkhd;
        s->usmblks = mi.usmblks;
        s->fsmblks = mi.fsmblks;
        s->uordblks = mi.uordblks;
        s->fordblks = mi.fordblks;
        s->keepcost = mi.keepcost;
        if (len) {
            memcpy(s->info, xml, len);
            s->info_len = len;
            s->info_truncated = truncated;
            s->info_t_ns = now_ns(CLOCK_MONOTONIC);
        }
    } else {
        __atomic_fetch_add(&s->seq, 1, __ATOMIC_ACQ_REL);
    }
    s->t_ns = now_ns(CLOCK_MONOTONIC);
    s->at_exit = at_exit;
    s->answered = request;
    s->cost_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    frees_at_snapshot = pace_counts().frees;
    uint64_t chunks = s->ordblks + s->smblks;
    if (chunks >= CHUNKS_TO_MEASURE && (double)s->cost_ns / (double)chunks > per_chunk_ns)
        per_chunk_ns = (double)s->cost_ns / (double)chunks;
    __atomic_fetch_add(&seg->snapshots, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&seg->snapshots_cost_ns, s->cost_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->seq, 1, __ATOMIC_RELEASE);
    leave();
    __atomic_store_n(&snap_lock, 0, __ATOMIC_RELEASE);
}

/* ---- the segment ---- */

static void parse_size(const char *v, uint64_t *to) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 0);
    if (!errno && end != v)
        *to = n;
}

/* glibc's defaults, then what the environment fixes (MALLOC_*_ and GLIBC_TUNABLES); any of
 * them turns the dynamic threshold off, as in glibc's ptmalloc_init. */
static void thresholds_from_environment(struct ste_segment *s) {
    s->mmap_threshold = 128 * 1024;
    s->trim_threshold = 128 * 1024;
    s->thresholds_dynamic = 1;
    const char *v;
    if ((v = getenv("MALLOC_MMAP_THRESHOLD_"))) {
        parse_size(v, &s->mmap_threshold);
        s->thresholds_dynamic = 0;
    }
    if ((v = getenv("MALLOC_TRIM_THRESHOLD_"))) {
        parse_size(v, &s->trim_threshold);
        s->thresholds_dynamic = 0;
    }
    if (getenv("MALLOC_TOP_PAD_") || getenv("MALLOC_MMAP_MAX_"))
        s->thresholds_dynamic = 0;
    const char *t = getenv("GLIBC_TUNABLES");
    if (t) {
        const char *keys[] = {"glibc.malloc.mmap_threshold=", "glibc.malloc.trim_threshold=",
                              "glibc.malloc.top_pad=", "glibc.malloc.mmap_max="};
        for (int k = 0; k < 4; k++) {
            const char *at = strstr(t, keys[k]);
            if (!at)
                continue;
            s->thresholds_dynamic = 0;
            if (k == 0)
                parse_size(at + strlen(keys[k]), &s->mmap_threshold);
            if (k == 1)
                parse_size(at + strlen(keys[k]), &s->trim_threshold);
        }
    }
}

static void which_allocator(struct ste_segment *s) {
    void *in_use = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    Dl_info self;
    const ElfW(Sym) *sym = NULL;
    /* A program linked without PIE that takes malloc's address gives it a canonical address in
     * its own PLT: dlsym finds the program, whose symbol is undefined there (Debian's python3).
     * Only a defined symbol is a malloc of the program's own. */
    int own = in_use && dladdr1(in_use, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
              sym->st_shndx != SHN_UNDEF && dladdr((void *)which_allocator, &self) &&
              info.dli_fbase != self.dli_fbase;
    if (own) {
        /* The program defines malloc (it comes before the shim): the shim sees nothing. */
        s->allocator = 3;
        strncpy(s->allocator_path, info.dli_fname ? info.dli_fname : "?", STE_PATH_CAP - 1);
    } else if (!is_glibc) {
        s->allocator = 2;
        if (dladdr((void *)next_malloc, &info) && info.dli_fname)
            strncpy(s->allocator_path, info.dli_fname, STE_PATH_CAP - 1);
    } else {
        s->allocator = 1;
        if (dladdr((void *)__libc_malloc, &info) && info.dli_fname)
            strncpy(s->allocator_path, info.dli_fname, STE_PATH_CAP - 1);
    }
}

static struct ste_segment *create(uint64_t origin) {
    const char *dir = getenv("STE_MALLOC_DIR");
    if (!dir || !*dir)
        return NULL;
    char path[4096];
    int fd = -1;
    pid_t pid = getpid();
    for (int n = 0; n < 10000 && fd < 0; n++) {
        snprintf(path, sizeof path, "%s/%d.%d", dir, (int)pid, n);
        /* 0660: under sudo, ste's run directory has a default ACL naming root
           (src/source/malloc/rundir.rs), which makes the group bits its mask: the owner and
           root may read and write the segment, so ste's sampler, which keeps no capability to
           override file permissions, can; no one else. Elsewhere (no ACL) the umask applies,
           in a directory only its owner may enter. */
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0660);
        if (fd < 0 && errno != EEXIST)
            return NULL;
    }
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, sizeof(struct ste_segment)) != 0) {
        close(fd);
        unlink(path);
        return NULL;
    }
    struct ste_segment *s =
        mmap(NULL, sizeof(struct ste_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED) {
        unlink(path);
        return NULL;
    }
    s->version = STE_MALLOC_VERSION;
    s->size = sizeof(struct ste_segment);
    s->flush_bytes = FLUSH_BYTES;
    s->pid = pid;
    s->ppid = getppid();
    s->created_ns = now_ns(CLOCK_MONOTONIC);
    s->origin = origin;
    ssize_t n = readlink("/proc/self/exe", s->exe, STE_PATH_CAP - 1);
    if (n < 0)
        s->exe[0] = 0;
    return s;
}

static void publish(struct ste_segment *s) {
    __atomic_store_n(&s->magic, STE_MALLOC_MAGIC, __ATOMIC_RELEASE);
}

/* In a forked child: leave the parent's segment, keep what the child's own will start with. */
static void after_fork_child(void) {
    struct ste_segment *parent = seg;
    if (!parent)
        return;
    /* This thread's slot and key value belong to the parent's segment. */
    my = mine = NULL;
    counted_thread = 0;
    if (slot_key_ok)
        pthread_setspecific(slot_key, NULL);
    fork_thresholds[0] = parent->mmap_threshold;
    fork_thresholds[1] = parent->trim_threshold;
    fork_thresholds[2] = parent->thresholds_dynamic;
    fork_allocator = parent->allocator;
    memcpy(fork_allocator_path, parent->allocator_path, STE_PATH_CAP);
    /* What the child holds: its copy of the parent's heap (the counters of the parent's other
     * threads cannot be trusted mid-fork; glibc's own account can). */
    fork_held = 0;
    if (parent->allocator == 1) {
        struct mallinfo2 mi = mallinfo2();
        fork_held = mi.uordblks + mi.hblkhd;
    }
    seg = NULL;
    munmap(parent, sizeof(struct ste_segment));
    fork_pending = 1;
}

/* The forked child's first call: its segment (its inherited heap shows in its snapshots). */
static void attach_forked(void) {
    fork_pending = 0;
    enter();
    struct ste_segment *s = create(2);
    if (s) {
        s->mmap_threshold = fork_thresholds[0];
        s->trim_threshold = fork_thresholds[1];
        s->thresholds_dynamic = fork_thresholds[2];
        s->allocator = fork_allocator;
        s->inherited_bytes = fork_held;
        memcpy(s->allocator_path, fork_allocator_path, STE_PATH_CAP);
        publish(s);
    }
    seg = s;
    /* The new segment counts from zero; the cost per chunk measured stays: same heap. */
    frees_at_snapshot = 0;
    leave();
}

__attribute__((constructor)) static void init(void) {
    resolve();
    enter();
    struct ste_segment *s = create(1);
    if (s) {
        thresholds_from_environment(s);
        which_allocator(s);
        slot_key_ok = pthread_key_create(&slot_key, retire) == 0;
        pthread_atfork(NULL, NULL, after_fork_child);
        publish(s);
        seg = s;
    }
    leave();
}

/* The share of an image's time its snapshots may take (ste paces its requests to the same
 * share): mallinfo2() walks every free chunk, so on a large fragmented heap one snapshot costs
 * milliseconds to a second. */
#define SNAPSHOT_BUDGET 0.01
/* What any image may spend on them whatever its life, so a short program still gets its
 * snapshot at exit (a few µs on a small heap). */
#define SNAPSHOT_ALLOWANCE_NS 1e6

__attribute__((destructor)) static void fini(void) {
    if (!seg)
        return;
    /* The exiting thread's last change joins the shared account (and dates its peak). */
    if (mine)
        flush(mine);
    /* The snapshot at exit costs at most what the last one did plus the walk of one more free
     * chunk per free or realloc since, at the cost per chunk measured, or else assumed from the
     * heap's size; skip it when that would take the image's snapshots over budget (the report
     * then shows the last one taken, with its time, and says the one at exit was skipped).
     * Predicting from the last cost alone let perl, whose last snapshot came before it emptied
     * its hash, spend a large share of its life on the one at exit (bench/README.md). */
    uint64_t spent = __atomic_load_n(&seg->snapshots_cost_ns, __ATOMIC_RELAXED);
    uint64_t life = now_ns(CLOCK_MONOTONIC) - seg->created_ns;
    uint64_t last = __atomic_load_n(&seg->snapshots, __ATOMIC_RELAXED) > 0 ? seg->snap.cost_ns : 0;
    struct pace_counts now = pace_counts();
    double per_chunk = per_chunk_ns > 0                ? per_chunk_ns
                       : now.held <= CACHED_HEAP_BYTES ? PER_CHUNK_CACHED_NS
                                                       : PER_CHUNK_NS;
    uint64_t added = now.frees >= frees_at_snapshot ? now.frees - frees_at_snapshot : now.frees;
    double predicted = (double)last + per_chunk * (double)added;
    if ((double)spent + predicted > SNAPSHOT_BUDGET * (double)life + SNAPSHOT_ALLOWANCE_NS)
        seg->exit_snapshot_skipped = 1;
    else
        snapshot(1);
    __atomic_store_n(&seg->exited, 1, __ATOMIC_RELEASE);
}

/* ---- the interposed functions ---- */

/* Every family: the fast path when this thread has glibc counters (`my`), else the slow path,
 * which claims a slot, counts any allocator's blocks, or counts nothing while the shim works. */

/* This thread has no glibc counters: its first call, the shim's own work, another allocator. */
static COLD void *malloc_slow(size_t n) {
    void *p = next_malloc(n);
    struct ste_counters *c = slow_counters();
    if (!c)
        return p;
    c->malloc_calls++;
    c->malloc_bytes += n;
    return counted(c, p, n);
}

/* The call and its bytes are counted before glibc's malloc runs, so nothing but the block has
 * to outlive the call: `n` needs no callee-saved register, and the counters' pointer is read
 * again after it (it cannot change meanwhile: glibc's malloc does not call back into the shim).
 * `asked` is 1 for alloc_rare, which reads it only for a NULL: from glibc's malloc, a NULL is a
 * failure whatever `n` (malloc(0) returns a minimum-size block). */
EXPORT void *malloc(size_t n) {
    struct ste_counters *c = my;
    if (UNLIKELY(!c))
        return malloc_slow(n);
    c->malloc_calls++;
    c->malloc_bytes += n;
    void *p = next_malloc(n);
    c = my;
    if (UNLIKELY(!p))
        return alloc_rare(c, p, 1, 0);
    size_t hdr = header(p);
    uint64_t net = (c->allocated_chunk_bytes += hdr & ~SIZE_BITS) - c->free_bytes;
    note_peak(c, net);
    if (UNLIKELY((hdr & IS_MMAPPED) | c->poll | held_moved(c, net)))
        return alloc_rare(c, p, 1, hdr);
    return p;
}

static COLD void free_slow(void *p) {
    struct ste_counters *c = slow_counters();
    if (c) {
        if (p) {
            c->free_calls++;
            c->free_bytes += block_bytes(p);
            if (is_glibc && (header(p) & IS_MMAPPED))
                freed_mmapped(header(p));
            account(c);
        } else {
            c->free_null_calls++;
        }
    }
    next_free(p);
}

/* The rare cases of a free: an mmapped block, or ste asked for a snapshot. It forwards the
 * free itself, so the fast path tail-calls either this or glibc's free and keeps nothing in a
 * callee-saved register. */
static COLD void free_rare(struct ste_counters *c, void *p, size_t hdr) {
    if (hdr & IS_MMAPPED)
        freed_mmapped(hdr);
    account(c);
    if (c->poll) {
        c->poll = 0;
        snapshot(0);
    }
    next_free(p);
}

EXPORT void free(void *p) {
    struct ste_counters *c = my;
    if (LIKELY(c != NULL) && LIKELY(p != NULL)) {
        c->free_calls++;
        size_t hdr = header(p);
        uint64_t net = c->allocated_chunk_bytes - (c->free_bytes += hdr & ~SIZE_BITS);
        if (UNLIKELY((hdr & IS_MMAPPED) | c->poll | held_moved(c, net)))
            free_rare(c, p, hdr);
        else
            next_free(p);
        return;
    }
    free_slow(p);
}

EXPORT void *calloc(size_t k, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(k, size, &n))
        n = (size_t)-1;
    void *p = next_calloc(k, size);
    struct ste_counters *c = my ? my : slow_counters();
    if (!c)
        return p;
    c->calloc_calls++;
    c->calloc_bytes += n == (size_t)-1 ? 0 : n;
    return counted(c, p, n);
}

EXPORT void *realloc(void *old, size_t n) {
    struct ste_counters *c = my ? my : slow_counters();
    size_t old_bytes = c ? block_bytes(old) : 0;
    void *p = next_realloc(old, n);
    if (!c)
        return p;
    c->realloc_calls++;
    c->realloc_bytes += n;
    if (!p && old && n) {
        /* Failed: the old block is still held. */
        c->failed_calls++;
        return p;
    }
    /* The old block was given back (moved, resized in place, or freed by realloc(p, 0)). */
    c->free_bytes += old_bytes;
    if (!p) {
        account(c);
        return p;
    }
    return counted(c, p, n);
}

EXPORT void *reallocarray(void *old, size_t k, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(k, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, n);
}

static void *counted_aligned(void *p, size_t n) {
    struct ste_counters *c = my ? my : slow_counters();
    if (!c)
        return p;
    c->memalign_calls++;
    c->memalign_bytes += n;
    return counted(c, p, n);
}

EXPORT void *memalign(size_t align, size_t n) {
    resolve();
    return counted_aligned(next_memalign(align, n), n);
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
    resolve();
    void *p = next_aligned_alloc ? next_aligned_alloc(align, n) : next_memalign(align, n);
    return counted_aligned(p, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    resolve();
    int rc;
    if (next_posix_memalign) {
        rc = next_posix_memalign(out, align, n);
    } else {
        *out = next_memalign(align, n);
        rc = *out ? 0 : ENOMEM;
    }
    counted_aligned(rc == 0 ? *out : NULL, n);
    return rc;
}

EXPORT void *valloc(size_t n) {
    resolve();
    void *p = next_valloc ? next_valloc(n) : next_memalign(sysconf(_SC_PAGESIZE), n);
    return counted_aligned(p, n);
}

EXPORT void *pvalloc(size_t n) {
    resolve();
    size_t page = sysconf(_SC_PAGESIZE);
    void *p = next_pvalloc ? next_pvalloc(n) : next_memalign(page, (n + page - 1) & ~(page - 1));
    return counted_aligned(p, n);
}

EXPORT int mallopt(int param, int value) {
    resolve();
    int rc = next_mallopt ? next_mallopt(param, value) : 0;
    if (rc == 1 && seg) {
        switch (param) {
        case M_MMAP_THRESHOLD:
            __atomic_store_n(&seg->mmap_threshold, (uint64_t)value, __ATOMIC_RELAXED);
            __atomic_store_n(&seg->thresholds_dynamic, 0, __ATOMIC_RELAXED);
            __atomic_fetch_add(&seg->threshold_changes, 1, __ATOMIC_RELAXED);
            break;
        case M_TRIM_THRESHOLD:
            __atomic_store_n(&seg->trim_threshold, (uint64_t)value, __ATOMIC_RELAXED);
            __atomic_store_n(&seg->thresholds_dynamic, 0, __ATOMIC_RELAXED);
            __atomic_fetch_add(&seg->threshold_changes, 1, __ATOMIC_RELAXED);
            break;
        case M_TOP_PAD:
        case M_MMAP_MAX:
            __atomic_store_n(&seg->thresholds_dynamic, 0, __ATOMIC_RELAXED);
            break;
        }
    }
    return rc;
}
