/*
 * Patching the prologues of a running program, compiled in the target by Frida's CModule (TinyCC).
 *
 * A 5-byte jump written over a function's first instructions is only safe when no thread is stopped *between*
 * two of those instructions: a thread that had run `push r15` and resumes at the second byte would execute the
 * middle of the jump (a wild branch; attach/detach cycles on a busy program crashed it, as Frida's own
 * Interceptor does on Linux). So the agent stops the world: every other thread gets a signal whose handler
 * (machine code in agent.js, in memory that is never freed) records the interrupted instruction pointer and
 * spins until released. With every thread parked, a jump is written unless some thread's instruction pointer is
 * strictly inside its 5 bytes (the agent retries those a moment later). Threads that do not park in time (the
 * signal blocked) are the one remaining risk; the 8-byte aligned store keeps even them from seeing half a jump
 * where the 5 bytes fit in one aligned word.
 *
 * Threads that block the signal (Frida's own, some runtimes' helpers) are not signalled: when they sit in the
 * kernel, /proc/self/task/TID/syscall gives the instruction pointer they will return to, which is checked like a
 * parked one; when they are running, where they are is unknown (counted in `unknown`, reported by the agent).
 *
 * Layout of CtWorld is shared with the handler in agent.js: parked at 0, release at 4, left at 8, rips at 24.
 * This CModule runtime has no g_atomic_int_get/set: aligned 32-bit volatile loads and stores are atomic on x86.
 */
#include <glib.h>

#define CT_MAX_RIPS 1024
#define CT_MAX_OTHERS 256
#define CT_MAX_RUNS 512

typedef struct _CtWorld CtWorld;
struct _CtWorld
{
  guint32 parked;   /* 0: threads in the handler (ticket) */
  guint32 release;  /* 4: set to let them go */
  guint32 left;     /* 8: threads that have left the handler */
  guint32 sent;     /* 12: signals sent in the last round */
  guint32 unknown;  /* 16: threads that block the signal and were running: position unknown */
  guint32 pad;
  guint64 rips[CT_MAX_RIPS]; /* 24 */
};

typedef struct _CtPatch CtPatch;
struct _CtPatch
{
  guint8 * fn;      /* 0 */
  guint8 bytes[16]; /* 8: the bytes to write: a 5-byte jump, a 14-byte far jump, or the original bytes */
  gint32 len;       /* 24 */
  gint32 done;      /* 28: set when written */
};                  /* 32 bytes */

struct ct_timespec
{
  gint64 tv_sec;
  glong tv_nsec;
};

extern long syscall (long number, ...);
extern void * opendir (const char * name);
extern void * readdir (void * dir);
extern int closedir (void * dir);
extern int mprotect (void * addr, gsize len, int prot);
extern int clock_gettime (int clk, struct ct_timespec * ts);

#define CT_SYS_READ 0
#define CT_SYS_OPEN 2
#define CT_SYS_CLOSE 3
#define CT_SYS_SCHED_YIELD 24
#define CT_SYS_GETPID 39
#define CT_SYS_GETTID 186
#define CT_SYS_TGKILL 234

static gint64
ct_now_ns (void)
{
  struct ct_timespec ts;
  clock_gettime (1, &ts);
  return ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
ct_write (guint8 * fn, const guint8 * bytes, gint len, gsize page, gboolean protect)
{
  gsize base = GPOINTER_TO_SIZE (fn) & ~(page - 1);
  gsize span = ((GPOINTER_TO_SIZE (fn) + len - 1) & ~(page - 1)) - base + page; /* the page(s) written, no more */
  gsize off = GPOINTER_TO_SIZE (fn) & 7;
  gint i;

  if (protect)
    mprotect (GSIZE_TO_POINTER (base), span, 7);
  if (len == 5 && off <= 3)
  {
    /* One aligned 8-byte store: a thread that did not park sees the old or the new bytes, never a mix. */
    volatile guint64 * word = (volatile guint64 *) (GPOINTER_TO_SIZE (fn) - off);
    guint64 v = *word;
    guint8 * b = (guint8 *) &v;
    for (i = 0; i < 5; i++)
      b[off + i] = bytes[i];
    *word = v;
  }
  else
  {
    for (i = 0; i < len; i++)
      ((volatile guint8 *) fn)[i] = bytes[i];
  }
  if (protect)
    mprotect (GSIZE_TO_POINTER (base), span, 5);
}

/* Read /proc/self/task/TID/NAME into buf (NUL-terminated); its length, or -1. */
static glong
ct_read_task (glong tid, const gchar * name, gchar * buf, glong size)
{
  gchar path[96], digits[24];
  const gchar * prefix = "/proc/self/task/";
  gint n = 0, i, k = 0, fd;
  glong len;

  for (i = 0; prefix[i] != 0; i++)
    path[n++] = prefix[i];
  do
  {
    digits[k++] = (gchar) ('0' + tid % 10);
    tid /= 10;
  } while (tid > 0);
  while (k > 0)
    path[n++] = digits[--k];
  path[n++] = '/';
  for (i = 0; name[i] != 0 && n < 90; i++)
    path[n++] = name[i];
  path[n] = 0;
  fd = (gint) syscall (CT_SYS_OPEN, path, 0);
  if (fd < 0)
    return -1;
  len = syscall (CT_SYS_READ, (glong) fd, buf, size - 1);
  syscall (CT_SYS_CLOSE, (glong) fd);
  if (len < 0)
    return -1;
  buf[len] = 0;
  return len;
}

static guint64
ct_hex (const gchar * p)
{
  guint64 v = 0;
  if (p[0] == '0' && p[1] == 'x')
    p += 2;
  for (;; p++)
  {
    if (*p >= '0' && *p <= '9')
      v = (v << 4) | (guint64) (*p - '0');
    else if (*p >= 'a' && *p <= 'f')
      v = (v << 4) | (guint64) (*p - 'a' + 10);
    else
      return v;
  }
}

/* Whether thread `tid` blocks signal `sig` (SigBlk in its status): it would not park. */
static gboolean
ct_blocks (glong tid, gint sig)
{
  gchar buf[4096];
  glong len = ct_read_task (tid, "status", buf, sizeof (buf)), i;

  for (i = 0; i + 8 < len; i++)
  {
    if (buf[i] == 'S' && buf[i + 1] == 'i' && buf[i + 2] == 'g' && buf[i + 3] == 'B' && buf[i + 4] == 'l' &&
        buf[i + 5] == 'k' && buf[i + 6] == ':')
    {
      for (i += 7; i < len && (buf[i] == ' ' || buf[i] == '\t'); i++)
        ;
      return (ct_hex (buf + i) >> (sig - 1)) & 1;
    }
  }
  return FALSE;
}

/* The user instruction pointer of a thread in the kernel (last field of its syscall file); 0 when running. */
static guint64
ct_kernel_pc (glong tid)
{
  gchar buf[512];
  glong len = ct_read_task (tid, "syscall", buf, sizeof (buf)), i;

  if (len <= 0 || buf[0] == 'r')
    return 0;
  for (i = len - 1; i > 0 && buf[i - 1] != ' '; i--)
    ;
  return ct_hex (buf + i);
}

/*
 * Stop every other thread with signal `sig` (the handler is installed by the agent), write each patch whose
 * bytes hold no parked thread's instruction pointer, let the threads go. `patches` are sorted by address.
 * Returns the number written (0 when not every signalled thread parked in time).
 */
gint
cudatrace_patch_stopped (CtWorld * w, gint sig, CtPatch * patches, gint n, gint timeout_ms, gint page)
{
  glong self = syscall (CT_SYS_GETTID);
  glong pid = syscall (CT_SYS_GETPID);
  gint sent = 0, parked, done = 0, i, j, unknown = 0, n_others = 0;
  guint64 others[CT_MAX_OTHERS];
  gsize runs[CT_MAX_RUNS][2];
  gint n_runs = 0;
  gboolean protect_each = FALSE;
  gint64 deadline;
  void * dir;

  *(volatile gint *) &w->parked = 0;
  *(volatile gint *) &w->left = 0;
  *(volatile gint *) &w->release = 0;

  dir = opendir ("/proc/self/task");
  if (dir != NULL)
  {
    void * entry;
    while ((entry = readdir (dir)) != NULL)
    {
      const gchar * name = (const gchar *) entry + 19; /* struct dirent: d_name after ino, off, reclen, type */
      glong tid = 0;
      if (name[0] < '0' || name[0] > '9')
        continue;
      for (j = 0; name[j] >= '0' && name[j] <= '9'; j++)
        tid = tid * 10 + (name[j] - '0');
      if (tid == self)
        continue;
      if (ct_blocks (tid, sig))
      {
        guint64 pc = ct_kernel_pc (tid);
        if (pc == 0)
          unknown++;
        else if (n_others < CT_MAX_OTHERS)
          others[n_others++] = pc;
        continue;
      }
      if (syscall (CT_SYS_TGKILL, pid, tid, (glong) sig) == 0)
        sent++;
    }
    closedir (dir);
  }
  w->sent = sent;
  w->unknown = unknown;

  deadline = ct_now_ns () + (gint64) timeout_ms * 1000000;
  while (*(volatile gint *) &w->parked < sent && ct_now_ns () < deadline)
    syscall (CT_SYS_SCHED_YIELD);
  parked = *(volatile gint *) &w->parked;
  if (parked > CT_MAX_RIPS)
    parked = CT_MAX_RIPS;
  if (parked < sent)
    n = 0; /* not every thread stopped in time (a loaded machine): write nothing, the agent tries again */

  /* Pages holding patches made writable run by run (the agent sorts the patches by address; every page of a run
   * holds a patch, so it is code and goes back to r-x), rather than page by page for each patch. */
  for (i = 0; i < n;)
  {
    gsize first = GPOINTER_TO_SIZE (patches[i].fn) & ~((gsize) page - 1);
    gsize last = (GPOINTER_TO_SIZE (patches[i].fn) + patches[i].len - 1) & ~((gsize) page - 1);
    for (j = i + 1; j < n; j++)
    {
      gsize a = GPOINTER_TO_SIZE (patches[j].fn) & ~((gsize) page - 1);
      if (a > last + (gsize) page)
        break;
      last = (GPOINTER_TO_SIZE (patches[j].fn) + patches[j].len - 1) & ~((gsize) page - 1);
    }
    if (n_runs < CT_MAX_RUNS)
    {
      runs[n_runs][0] = first;
      runs[n_runs][1] = last + (gsize) page;
      mprotect (GSIZE_TO_POINTER (first), last + (gsize) page - first, 7);
      n_runs++;
    }
    else
    {
      protect_each = TRUE;
    }
    i = j;
  }

  for (i = 0; i < n; i++)
  {
    gsize lo = GPOINTER_TO_SIZE (patches[i].fn);
    gboolean inside = FALSE;
    for (j = 0; j < parked; j++)
    {
      gsize rip = (gsize) w->rips[j];
      if (rip > lo && rip < lo + (gsize) patches[i].len)
        inside = TRUE;
    }
    for (j = 0; j < n_others; j++)
    {
      if (others[j] > lo && others[j] < lo + (gsize) patches[i].len)
        inside = TRUE;
    }
    if (inside)
      continue;
    ct_write (patches[i].fn, patches[i].bytes, patches[i].len, (gsize) page, protect_each);
    patches[i].done = 1;
    done++;
  }
  for (i = 0; i < n_runs; i++)
    mprotect (GSIZE_TO_POINTER (runs[i][0]), runs[i][1] - runs[i][0], 5);

  *(volatile gint *) &w->release = 1;
  deadline = ct_now_ns () + (gint64) timeout_ms * 1000000;
  while (*(volatile gint *) &w->left < *(volatile gint *) &w->parked && ct_now_ns () < deadline)
    syscall (CT_SYS_SCHED_YIELD);
  return done;
}
