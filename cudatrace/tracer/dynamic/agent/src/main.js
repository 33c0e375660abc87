/*
 * cudatrace's Frida agent: runs inside the traced process, hooks every exported function of every CUDA library
 * the process loads (also late, by dlopen/LoadLibrary), counts calls in native code and sends cumulative
 * batches to the host. Configured by the host through rpc.exports.configure(config); message names come in
 * the configuration (cudatrace/tracer/dynamic/protocol.py declares them once).
 *
 * The common path is native: on x86-64 each entry point's prologue jumps (Interceptor.replaceFast, or a direct
 * patch) to a thunk generated here, allocated within branch range of the library. On Linux with glibc's rseq
 * area (glibc >= 2.35) it counts per CPU in a restartable sequence, without a locked instruction:
 *
 *     movabs r11, &descriptor ; mov fs:[rseq_cs], r11     ; r10 and r11 are scratch in both x64 conventions
 *   start:
 *     mov r10d, fs:[cpu_id] ; cmp r10d, cpus ; jae fallback (lock inc in a shared row)
 *     shl r10, log2(row) ; movabs r11, &counter ; inc qword [r11 + r10]   ; commit; preempted before: restart
 *     cmp qword [&detail.calls], N ; jb detail_stub     ; the first N calls: statuses, callers, times (detail.c)
 *     <the function's first instructions, relocated> ; jmp back into the function
 *
 * Elsewhere the head is `movabs r11, &counter; lock inc qword [r11]` (plain `inc` with --fast-counters).
 * The counters live in a shared file mapping (Linux) that the host reads after the process is gone, so counts
 * survive SIGKILL. Other CPUs fall back to Interceptor.attach with the native listener (slower; reported).
 */

rpc.exports = {
  configure(config) {
    S.cfg = config;
    S.M = config.messages;
    S.libPatterns = config.libraryPatterns.map(p => new RegExp(p, 'i'));
    S.exportPattern = new RegExp(config.exportPattern);
    const symbols = {};
    const cg = Module.findGlobalExportByName('clock_gettime');
    if (cg !== null) symbols.clock_gettime = cg;
    S.cm = new CModule(config.detailSource, symbols);
    S.layout = readDetailLayout(S.cm.cudatrace_detail_layout);
    const nowFn = new NativeFunction(S.cm.cudatrace_now_ns, 'uint64', []);
    S.nowNs = () => nowFn().toNumber();
    S.counterCap = config.counterCapacity;
    S.rseq = setupPerCpu();
    S.counterRows = S.rseq !== null ? S.rseq.cpus + 1 : 1;
    const parent = readForkState(config.adopt); // a forked child: its parent's hooks are its own (adoption.js)
    if (parent !== null) {
      takeOverStorage(parent);
    } else if (config.sharedCounters !== null && Process.platform === 'linux') {
      S.counters = openSharedCounters(config.sharedCounters, S.counterCap);
      if (S.counters !== null) {
        S.shmPath = config.sharedCounters;
        S.detailShared = openSharedDetail(config.sharedCounters + '.detail', S.counterCap);
        if (S.detailShared !== null) S.detailPath = config.sharedCounters + '.detail';
      }
    }
    if (S.counters === null) S.counters = lastingAlloc(S.counterRows * S.counterCap * 8);
    S.countersAt = num(S.counters);
    Process.setExceptionHandler(details => {
      try {
        flush(true, 'crash: ' + details.type, null, details.type);
        awaitAck(2); // the batch must leave before the default handler ends us
      } catch (_) { /* the process is going down anyway */ }
      return false;
    });
    listenForAcks();
    if (parent !== null) {
      takeOverForkState(parent);
    } else {
      installForkHandler();
      forkRegion(S.counters, S.counterRows * S.counterCap * 8);
      if (S.detailShared !== null) forkRegion(S.detailShared.p, S.detailShared.cap * S.layout.size);
    }
    guardAgentDescriptors();
    S.world = setupWorld();
    S.dispatch = parent !== null ? setupDispatch(parent.dispatchAt) : setupDispatch();
    describeForFork();
    S.livePatching = config.attached === true; // a spawned program is still suspended during the first scan
    if (parent !== null && adoptEntries(parent) > 0) sendHooks(0);
    watchModules(); // queues every module loaded now
    scanModules();
    S.livePatching = true;
    watchLoads();
    listenForFlushes();
    return {
      pid: Process.id, arch: Process.arch, platform: Process.platform, nowNs: S.nowNs().toString(),
      sharedCounters: S.shmPath, fastPath: IS_X64,
      sharedDetail: S.detailPath, detailLayout: LAYOUT_FIELDS.map(name => S.layout[name]),
      counterMode: !IS_X64 ? 'listener' : (S.rseq !== null ? 'per-cpu' : (S.cfg.counters === 'plain' ? 'plain' : 'locked')),
      counterRows: S.counterRows, counterCapacity: S.counterCap,
      forkState: S.fork !== null ? S.fork.p.toString() : null, adopted: S.hookCounts.adopted,
    };
  },
  flush() {
    flush(false, 'requested');
    return true;
  },
  // Before the host detaches and leaves the process running: put back the prologues the agent patched itself
  // (Frida reverts its own hooks when the script unloads). Threads still inside a thunk finish through it: the
  // thunks, their counters and detail records stay mapped.
  release() {
    if (S.flushTimer !== null) { clearInterval(S.flushTimer); S.flushTimer = null; }
    // No thread takes a detail stub any more: Frida reverts their listeners when the script unloads.
    const never = uint64('0x4000000000000000');
    for (const e of S.entries) if (e.detail !== null && e.slot >= 0) e.detail.add(S.layout.calls).writeU64(never);
    if (S.restoreTable !== null) S.restoreTable.writeU64(0);
    // A thread can be at a jump but never inside one: putting the original bytes back needs no stopped world,
    // only a store no thread sees half done.
    const patches = S.directPatches.splice(0).filter(([fn]) => Process.findModuleByAddress(fn) !== null);
    if (S.world !== null) return patches.length - worldPatch(patches.map(([fn, bytes]) => ({ fn, bytes }))).length;
    let left = 0;
    for (const [fn, bytes] of patches) if (bytes.length !== 5 || !writeJump5(fn, bytes, true)) left++;
    return left;
  },
};
