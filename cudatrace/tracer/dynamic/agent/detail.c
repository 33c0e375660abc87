/*
 * The detail path of cudatrace's agent, compiled in the target by Frida's CModule (TinyCC).
 *
 * Each hooked entry point has a counting thunk (generated machine code, see agent.js) that sends the first N
 * calls through a small stub into this listener (on x86-64 one attachment for all: the stub passes its entry's
 * record in r11, see setupDispatch in agent.js; elsewhere one per entry point). It records, per entry point, the return
 * codes other than success, the calling return addresses (turned into module names by the agent), the time of
 * the first call and the time spent. Everything is lock-free: TinyCC has no __atomic builtins, and of glib's g_atomic_* only the
 * add operations are there (aligned plain loads and stores are atomic on the CPUs Frida supports). The layout of
 * CtDetail is defined here only: the agent (agent/src/counters.js) reads its size, offsets and capacities from
 * cudatrace_detail_layout.
 *
 * It also holds the one byte loop of hooking (cudatrace_may_branch_into): in the agent's JavaScript runtime it
 * cost as much as decoding the instructions it saves decoding.
 */
#include <gum/guminterceptor.h>

#define CT_STATUSES 8
#define CT_CALLERS 48

typedef struct _CtDetail CtDetail;
struct _CtDetail
{
  gsize first_ns;              /* 0 */
  gsize time_ns;               /* 8 */
  gsize calls;                 /* 16: calls that took the detail path */
  gint n_codes;                /* 24: status slots claimed */
  gint n_callers;              /* 28: caller slots claimed */
  gint codes[CT_STATUSES];     /* 32 */
  gsize code_counts[CT_STATUSES]; /* 64 */
  gsize other_codes;           /* 128 */
  gpointer callers[CT_CALLERS];    /* 136 */
  gsize caller_counts[CT_CALLERS]; /* 520 */
  gsize other_callers;         /* 904 */
};                             /* 912 bytes */

#define CT_OFFSET(field) ((gsize) & ((CtDetail *) 0)->field)

/* Read by the agent (readDetailLayout in agent/src/counters.js), in this order. */
const gsize cudatrace_detail_layout[14] = {
  sizeof (CtDetail), CT_OFFSET (first_ns), CT_OFFSET (time_ns), CT_OFFSET (calls), CT_OFFSET (n_codes),
  CT_OFFSET (n_callers), CT_OFFSET (codes), CT_OFFSET (code_counts), CT_OFFSET (other_codes), CT_OFFSET (callers),
  CT_OFFSET (caller_counts), CT_OFFSET (other_callers), CT_STATUSES, CT_CALLERS,
};

typedef struct _CtState CtState;
struct _CtState
{
  gsize t0;
  CtDetail * d;
};

struct ct_timespec
{
  gint64 tv_sec;
  glong tv_nsec;
};

extern int clock_gettime (int clk, struct ct_timespec * ts);

static gsize
ct_now (void)
{
  struct ct_timespec ts;
  clock_gettime (1, &ts); /* CLOCK_MONOTONIC: the host reads the same clock */
  return (gsize) ts.tv_sec * 1000000000 + (gsize) ts.tv_nsec;
}

gsize
cudatrace_now_ns (void)
{
  return ct_now ();
}

/*
 * Slots are claimed with a ticket (g_atomic_int_add returns the old value; this CModule runtime has no
 * compare-and-exchange). Two threads meeting the same new code at once may claim two slots for it: the agent
 * adds duplicates together, and skips a slot whose key is not written yet.
 */
static void
ct_count_status (CtDetail * d, gint code)
{
  gint i, n = *(volatile gint *) &d->n_codes;
  for (i = 0; i < n && i < CT_STATUSES; i++)
  {
    if (*(volatile gint *) &d->codes[i] == code)
    {
      g_atomic_pointer_add (&d->code_counts[i], 1);
      return;
    }
  }
  i = g_atomic_int_add (&d->n_codes, 1);
  if (i < CT_STATUSES)
  {
    d->codes[i] = code;
    g_atomic_pointer_add (&d->code_counts[i], 1);
    return;
  }
  g_atomic_pointer_add (&d->other_codes, 1);
}

static void
ct_count_caller (CtDetail * d, gpointer ret)
{
  gint i, n = *(volatile gint *) &d->n_callers;
  for (i = 0; i < n && i < CT_CALLERS; i++)
  {
    if (*(volatile gpointer *) &d->callers[i] == ret)
    {
      g_atomic_pointer_add (&d->caller_counts[i], 1);
      return;
    }
  }
  i = g_atomic_int_add (&d->n_callers, 1);
  if (i < CT_CALLERS)
  {
    d->callers[i] = ret;
    g_atomic_pointer_add (&d->caller_counts[i], 1);
    return;
  }
  g_atomic_pointer_add (&d->other_callers, 1);
}

void
onEnter (GumInvocationContext * ic)
{
  CtState * s = GUM_IC_GET_INVOCATION_DATA (ic, CtState);
  s->t0 = ct_now ();
  s->d = GUM_IC_GET_FUNC_DATA (ic, CtDetail *);
#if defined (__x86_64__)
  /* The shared listener (agent.js, setupDispatch) is attached without data: each stub passes its record in r11. */
  if (s->d == NULL)
    s->d = (CtDetail *) GSIZE_TO_POINTER (ic->cpu_context->r11);
#endif
}

void
onLeave (GumInvocationContext * ic)
{
  gsize t1 = ct_now ();
  CtState * s = GUM_IC_GET_INVOCATION_DATA (ic, CtState);
  CtDetail * d = s->d;

  if (*(volatile gsize *) &d->first_ns == 0)
    d->first_ns = s->t0; /* a race here only picks one of two near-equal times */
  g_atomic_pointer_add (&d->time_ns, t1 - s->t0);
  g_atomic_pointer_add (&d->calls, 1);
  {
    /* Every return value is kept as a 32-bit code; the host keeps it only for functions known to return a status. */
    gint code = (gint) GPOINTER_TO_SIZE (gum_invocation_context_get_return_value (ic));
    if (code != 0)
      ct_count_status (d, code);
  }
  /* A tail call out of another function on the detail path returns through the Interceptor's own code: the
   * agent names such addresses "[anonymous]", like JIT code (this runtime has no gum_invocation_stack_translate). */
  ct_count_caller (d, gum_invocation_context_get_return_address (ic));
}

/*
 * Before a prologue is overwritten directly, no branch may land inside the `n` bytes replaced. This is the quick,
 * conservative half of that check: read as if an instruction started at every one of the first 256 bytes, is
 * there a relative jump, conditional jump, loop or call whose target lies strictly inside? Only a function for
 * which it says 1 is decoded instruction by instruction (agent.js, noBranchInto). The caller guarantees that
 * p[0] .. p[261] are readable.
 */
static gint
ct_s32 (const guint8 * b)
{
  return (gint) ((guint32) b[0] | ((guint32) b[1] << 8) | ((guint32) b[2] << 16) | ((guint32) b[3] << 24));
}

int
cudatrace_may_branch_into (const guint8 * p, int n)
{
  int i;
  for (i = 0; i < 256; i++)
  {
    guint8 op = p[i];
    int t;
    if ((op >= 0x70 && op <= 0x7f) || op == 0xeb || (op >= 0xe0 && op <= 0xe3))
      t = i + 2 + (gint8) p[i + 1]; /* jcc, jmp, loop, jrcxz rel8 */
    else if (op == 0xe8 || op == 0xe9)
      t = i + 5 + ct_s32 (p + i + 1); /* call, jmp rel32 */
    else if (op == 0x0f && p[i + 1] >= 0x80 && p[i + 1] <= 0x8f)
      t = i + 6 + ct_s32 (p + i + 2); /* jcc rel32 */
    else
      continue;
    if (t > 0 && t < n)
      return 1;
  }
  return 0;
}
