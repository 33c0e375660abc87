// What reaches the host: hooks messages, cumulative count batches (asked for by the host, or final at exit and
// crash) and the acknowledgement the exiting thread waits for.

function sendHooks(from) {
  const rows = [];
  for (let i = from; i < S.entries.length; i++) {
    const e = S.entries[i];
    if (e.dead) continue; // left alone: named in `skipped`
    rows.push([e.id, e.module, e.path, e.fn, e.aliases, e.slot, e.viaProc === true]);
  }
  if (rows.length > 0 || S.skipped.length > 0) {
    send({ type: S.M.hooks, pid: Process.id, entries: rows, skipped: S.skipped.splice(0), methods: S.hookCounts,
      patching: S.patching,
      timing: S.hookTimes });
  }
}

// The periodic batch is asked for by the host (a message every flushMs), not a timer of the agent's: in a forked
// child the parent's script is still there for a while, and a timer of it firing there crashed children (with a
// 20 ms timer 50 of 150 children forked at once died of SIGSEGV). No message reaches the parent's script in a
// child, so none of its JavaScript runs there on its own.
function listenForFlushes() {
  recv(S.M.flush, () => {
    if (!S.exiting) flush(false, null);
    listenForFlushes();
  });
}

function callerName(addr) {
  const k = addr.toString();
  let n = S.callerNames.get(k);
  if (n === undefined) {
    const m = Process.findModuleByAddress(addr);
    n = m ? m.name : '[anonymous]';
    S.callerNames.set(k, n);
  }
  return n;
}

function detailRow(e, calls) {
  const d = e.detail;
  const statuses = [];
  const callers = new Map();
  let first = 0, time = 0;
  if (d !== null) {
    first = u64(d.add(S.layout.first));
    time = u64(d.add(S.layout.time));
    const nCodes = Math.min(d.add(S.layout.nCodes).readS32(), S.layout.statuses);
    for (let i = 0; i < nCodes; i++) {
      const code = d.add(S.layout.codes + 4 * i).readS32();
      if (code !== 0) statuses.push([code, u64(d.add(S.layout.codeCounts + 8 * i))]);
    }
    const oc = u64(d.add(S.layout.otherCodes));
    if (oc > 0) statuses.push(['other', oc]);
    const nCallers = Math.min(d.add(S.layout.nCallers).readS32(), S.layout.callerSlots);
    for (let i = 0; i < nCallers; i++) {
      const r = d.add(S.layout.callers + 8 * i).readPointer();
      if (r.isNull()) continue;
      const who = callerName(r);
      callers.set(who, (callers.get(who) || 0) + u64(d.add(S.layout.callerCounts + 8 * i)));
    }
    const ocl = u64(d.add(S.layout.otherCallers));
    if (ocl > 0) callers.set('[other]', (callers.get('[other]') || 0) + ocl);
  }
  if (e.js !== null) {
    first = e.js.first === 0 ? first : Number(e.js.first);
    time += e.js.time;
    for (const [c, n] of e.js.statuses) statuses.push([c, n]);
    for (const [w, n] of e.js.callers) callers.set(w, (callers.get(w) || 0) + n);
  }
  const detailCalls = d !== null ? u64(d.add(S.layout.calls)) : (e.js ? e.js.calls : 0);
  return [e.id, calls, first.toString(), time, statuses, Array.from(callers.entries()), detailCalls];
}

// Hold the exiting (or crashing) thread until the host confirms the final batch, at most `seconds`.
// Thread.sleep lets the agent's JavaScript thread run meanwhile, which delivers the batch and the answer.
function awaitAck(seconds) {
  const want = S.seq - 1;
  for (let waited = 0; S.acked < want && waited < seconds; waited += 0.005) Thread.sleep(0.005);
}

function listenForAcks() {
  recv(S.M.ack, msg => {
    S.acked = Math.max(S.acked, msg.seq);
    listenForAcks();
  });
}

function flush(final, reason, exitCode, crash, ack) {
  const sums = readCounters();
  const rows = [];
  for (const e of S.entries) {
    let calls;
    if (e.js !== null) calls = e.js.calls;
    else if (e.counterIsDetail) calls = u64(e.detail.add(S.layout.calls));
    else if (e.slot >= 0 && sums !== null) calls = sums[e.slot];
    else calls = 0;
    // Resend when the detail path moved too: its first-call time lands after the counter's increment.
    const stamp = calls + '/' + (e.detail !== null ? u64(e.detail.add(S.layout.calls)) : 0);
    if (calls === 0 || stamp === S.lastSent[e.id]) continue;
    S.lastSent[e.id] = stamp;
    rows.push(detailRow(e, calls));
  }
  const msg = {
    type: S.M.counts, pid: Process.id, seq: S.seq++, final: final === true, reason: reason || null, rows,
    exitCode: exitCode === undefined ? null : exitCode, crash: crash === undefined ? null : crash,
    lookups: Array.from(S.lookups.values()), exportTables: Array.from(S.exportTables.values()),
    gpuModules: Array.from(S.gpuModules.values()),
    loaderErrors: Array.from(S.loaderErrors.values()), ack: ack === true,
  };
  send(msg);
  if (S.events.length > 0 || S.eventsDropped > 0) {
    send({ type: S.M.events, pid: Process.id, events: S.events.splice(0), dropped: S.eventsDropped });
    S.eventsDropped = 0;
  }
}
