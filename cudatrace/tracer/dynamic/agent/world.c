/*
 * Patching the prologues of a running program, compiled in the target by Frida's CModule (TinyCC).
 *
 * A 5-byte jump written over a function's first instructions is only safe when no thread is stopped *between*
 * two of those instructions: a thread that had run `push r15` and resumes at the second byte would execute the
 * middle of the jump (a wild branch; attach/detach cycles on a busy program crashed it, as Frida's own
 * Interceptor does on Linux). So the agent stops the world: every other thread gets a signal whose handler
 * (machine code in agent.js, in memory that is never freed) records the interrupted instruction pointer and
 * spins until released (threads that block the signal, such as Frida's own, are left alone). With every thread parked, a jump is written unless some thread's instruction pointer is
 * strictly inside its 5 bytes (the agent retries those a moment later). Threads that do not park in time (the
 * signal blocked) are the one remaining risk; the 8-byte aligned store keeps even them from seeing half a jump
 * where the 5 bytes fit in one aligned word.
 *
 * Layout of CtWorld is shared with the handler in agent.js: parked at 0, release at 4, left at 8, rips at 16.
 * This CModule runtime has no g_atomic_int_get/set: aligned 32-bit volatile loads and stores are atomic on x86.
 */
#include <glib.h>

#define CT_MAX_RIPS 1024

typedef struct _CtWorld CtWorld;
struct _CtWorld
{
  guint32 parked;   /* 0: threads in the handler (ticket) */
  guint32 release;  /* 4: set to let them go */
  guint32 left;     /* 8: threads that have left the handler */
  guint32 sent;     /* 12: signals sent in the last round (diagnostics) */
  guint64 rips[CT_MAX_RIPS]; /* 16 */
};

typedef struct _CtPatch CtPatch;
struct _CtPatch
{
  guint8 * fn;      /* 0 */
  guint8 bytes[8];  /* 8: the 5 bytes to write */
  gint32 done;      /* 16: set when written */
  gint32 pad;
};                  /* 24 bytes */

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
ct_write (guint8 * fn, const guint8 * bytes, gsize page)
{
  gsize base = GPOINTER_TO_SIZE (fn) & ~(page - 1);
  gsize off = GPOINTER_TO_SIZE (fn) & 7;
  gint i;

  mprotect (GSIZE_TO_POINTER (base), 2 * page, 7);
  if (off <= 3)
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
    for (i = 0; i < 5; i++)
      ((volatile guint8 *) fn)[i] = bytes[i];
  }
  mprotect (GSIZE_TO_POINTER (base), 2 * page, 5);
}

/* Whether thread `tid` blocks signal `sig` (SigBlk in /proc/self/task/TID/status): it would not park. */
static gboolean
ct_blocks (glong tid, gint sig)
{
  gchar path[64], buf[4096];
  const gchar * prefix = "/proc/self/task/";
  gchar digits[24];
  gint n = 0, i, k, fd;
  glong len;
  guint64 mask = 0;

  for (i = 0; prefix[i] != 0; i++)
    path[n++] = prefix[i];
  k = 0;
  do
  {
    digits[k++] = (gchar) ('0' + tid % 10);
    tid /= 10;
  } while (tid > 0);
  while (k > 0)
    path[n++] = digits[--k];
  for (i = 0; "/status"[i] != 0; i++)
    path[n++] = "/status"[i];
  path[n] = 0;
  fd = (gint) syscall (CT_SYS_OPEN, path, 0);
  if (fd < 0)
    return FALSE;
  len = syscall (CT_SYS_READ, (glong) fd, buf, (glong) sizeof (buf) - 1);
  syscall (CT_SYS_CLOSE, (glong) fd);
  if (len <= 0)
    return FALSE;
  buf[len] = 0;
  for (i = 0; i + 8 < len; i++)
  {
    if (buf[i] == 'S' && buf[i + 1] == 'i' && buf[i + 2] == 'g' && buf[i + 3] == 'B' && buf[i + 4] == 'l' &&
        buf[i + 5] == 'k' && buf[i + 6] == ':')
    {
      for (i += 7; i < len && (buf[i] == ' ' || buf[i] == '\t'); i++)
        ;
      for (; i < len; i++)
      {
        gchar c = buf[i];
        if (c >= '0' && c <= '9')
          mask = (mask << 4) | (guint64) (c - '0');
        else if (c >= 'a' && c <= 'f')
          mask = (mask << 4) | (guint64) (c - 'a' + 10);
        else
          break;
      }
      return (mask >> (sig - 1)) & 1;
    }
  }
  return FALSE;
}

/*
 * Stop every other thread with signal `sig` (the handler is installed by the agent), write each patch whose
 * 5 bytes hold no parked thread's instruction pointer, let the threads go. Returns the number written.
 */
gint
cudatrace_patch_stopped (CtWorld * w, gint sig, CtPatch * patches, gint n, gint timeout_ms, gint page)
{
  glong self = syscall (CT_SYS_GETTID);
  glong pid = syscall (CT_SYS_GETPID);
  gint sent = 0, parked, done = 0, i, j;
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
      if (tid == self || ct_blocks (tid, sig))
        continue;
      if (syscall (CT_SYS_TGKILL, pid, tid, (glong) sig) == 0)
        sent++;
    }
    closedir (dir);
  }
  w->sent = sent;

  deadline = ct_now_ns () + (gint64) timeout_ms * 1000000;
  while (*(volatile gint *) &w->parked < sent && ct_now_ns () < deadline)
    syscall (CT_SYS_SCHED_YIELD);
  parked = *(volatile gint *) &w->parked;
  if (parked > CT_MAX_RIPS)
    parked = CT_MAX_RIPS;

  for (i = 0; i < n; i++)
  {
    gsize lo = GPOINTER_TO_SIZE (patches[i].fn);
    gboolean inside = FALSE;
    for (j = 0; j < parked; j++)
    {
      gsize rip = (gsize) w->rips[j];
      if (rip > lo && rip < lo + 5)
        inside = TRUE;
    }
    if (inside)
      continue;
    ct_write (patches[i].fn, patches[i].bytes, (gsize) page);
    patches[i].done = 1;
    done++;
  }

  *(volatile gint *) &w->release = 1;
  deadline = ct_now_ns () + (gint64) timeout_ms * 1000000;
  while (*(volatile gint *) &w->left < *(volatile gint *) &w->parked && ct_now_ns () < deadline)
    syscall (CT_SYS_SCHED_YIELD);
  return done;
}
