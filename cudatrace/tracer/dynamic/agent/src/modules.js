// Which libraries are hooked and when: hooking a module's exports, scanning the module list, the dlopen/
// LoadLibrary and exit hooks, the caller's RPATH/RUNPATH for dlopen, failed loads, guarded close_range.

function canonical(names) {
  if (names.length === 1) return names[0];
  return names.slice().sort((a, b) => (a.length - b.length) || (a < b ? -1 : a > b ? 1 : 0))[0];
}

function resolveIfuncs(m, symbols) {
  // An IFUNC export's symbol points at its resolver; dlsym returns the implementation the loader chose.
  const out = [];
  if (Process.platform !== 'linux') return out;
  const unknown = symbols.filter(s => s.isGlobal && s.type === 'unknown' && S.exportPattern.test(s.name));
  if (unknown.length === 0) return out;
  // 'exclusive': keep the JavaScript lock, so no other hook runs while the scan is half done.
  const opts = { scheduling: 'exclusive' };
  const dlopen = new NativeFunction(Module.getGlobalExportByName('dlopen'), 'pointer', ['pointer', 'int'], opts);
  const dlsym = new NativeFunction(Module.getGlobalExportByName('dlsym'), 'pointer', ['pointer', 'pointer'], opts);
  const h = dlopen(Memory.allocUtf8String(m.path), 0x4 | 0x2 /* RTLD_NOLOAD|RTLD_NOW */);
  if (h.isNull()) return out;
  for (const s of unknown) {
    const impl = dlsym(h, Memory.allocUtf8String(s.name));
    if (!impl.isNull()) out.push({ name: s.name, address: impl, size: 16, ifunc: true });
  }
  return out;
}

function hookModule(m) {
  const symbols = m.enumerateSymbols();
  const sizes = new Map(); // function start (a number) -> its symbol's size
  // Where functions start, as numbers sorted by the typed array's own sort: sorting the pointers with compare()
  // cost ~0.3 µs a comparison, tens of ms for a library with ten thousand symbols (PyTorch's hold 19,000).
  const numbers = [];
  for (const s of symbols) {
    if (s.type !== 'function' && s.type !== 'unknown') continue;
    const a = num(s.address);
    numbers.push(a);
    if (s.size !== undefined && s.type === 'function') sizes.set(a, s.size);
  }
  const starts = new Float64Array(numbers).sort();
  const funcs = m.enumerateExports().filter(e => e.type === 'function' && S.exportPattern.test(e.name));
  for (const f of resolveIfuncs(m, symbols)) funcs.push(f);
  // Two names, one address: hook once, under the canonical name.
  const byAddr = new Map();
  for (const f of funcs) {
    const key = f.address.toString();
    const g = byAddr.get(key);
    if (g === undefined) byAddr.set(key, { address: f.address, key, names: [f.name] });
    else g.names.push(f.name);
  }
  const specials = new Set(S.cfg.specials);
  const groups = [];
  for (const g of byAddr.values()) {
    const name = canonical(g.names);
    if (S.hookedAddrs.has(g.key)) continue; // already hooked (a forwarder or a second load)
    if (specials.has(name) || g.names.some(n => specials.has(n))) {
      try {
        hookSpecial(m, g.address, name, g.names);
      } catch (err) {
        S.skipped.push([m.name, name, String(err.message || err)]); // the module's other exports are still hooked
        const last = S.entries[S.entries.length - 1];
        if (last !== undefined && last.fn === name) last.dead = true;
        S.hookedAddrs.delete(g.key);
      }
      continue;
    }
    // Another symbol inside the 5 bytes the jump overwrites (functions packed together): leave it alone.
    const at = num(g.address), next = nextStart(starts, at);
    if (next !== null && next - at < 5) {
      S.skipped.push([m.name, name, 'too short to hook (' + (next - at) + ' bytes before the next function)']);
      continue;
    }
    groups.push({ address: g.address, key: g.key, at, name, names: g.names,
      next: next === null ? null : g.address.add(next - at) });
  }
  if (groups.length === 0) return;
  if (!IS_X64) {
    for (const g of groups) {
      const e = newEntry(m.name, m.path, g.name, g.names);
      newDetail(e);
      try {
        Interceptor.attach(g.address, S.cm, e.detail);
        if (S.cfg.events) attachEvents(g.address, e);
        e.counterIsDetail = true;
        S.hookedAddrs.set(g.address.toString(), e.id);
      } catch (err) {
        S.skipped.push([m.name, g.name, String(err.message || err)]);
      }
    }
    return;
  }
  const per = BLOCK_SIZE;
  const codeSize = Math.ceil((groups.length * per) / PAGE) * PAGE;
  const maxDistance = Math.max(0x10000000, 0x70000000 - m.size);
  const code = nearMap(codeSize, m, maxDistance);
  const far = code.far === true;
  const pending = [];
  const first = S.entries.length, patchedFrom = S.directPatches.length;
  S.codeLent = code.lent === true;
  noteCounterUsed(S.counterUsed + groups.length);
  // The library's code runs nowhere yet: its jumps go in with its code made writable once (openSpan).
  if (!far && (S.lateScan || !S.livePatching)) openSpan(groups.map(g => g.at));
  try {
    hookGroups(m, groups, code, far, pending, sizes);
  } finally {
    closeSpan();
  }
  finishPending(pending, m);
  S.codeLent = false;
  noteCounterUsed();
  if (!code.lent) logPatched(m, S.entries.slice(first), S.directPatches.slice(patchedFrom));
}

// Each group's entry, its block of code (at `code`, one after another) and its hook; pending ones are left for
// finishPending.
function hookGroups(m, groups, code, far, pending, sizes) {
  const codeAt = num(code);
  const codeRanges = []; // filled as met (a module's own range list goes by the path it was loaded by)
  let i = 0;
  for (const g of groups) {
    const e = newEntry(m.name, m.path, g.name, g.names);
    e.slot = allocCounter();
    e.address = g.key;
    newDetail(e);
    const L = blockAt(code.add(i * BLOCK_SIZE), codeAt + i * BLOCK_SIZE);
    e.stubAt = L.stub.toString();
    i++;
    try {
      const limit = codeEnd(codeRanges, g.address);
      const size = sizes.get(g.at);
      const how = far ? hookFar(g.address, L, e, pending, limit, size)
        : hookExport(g.address, L, e, g.next, pending, limit, size);
      if (how === 'pending') continue;
      S.hookCounts[how]++;
      e.how = how;
      S.hookedAddrs.set(g.key, e.id);
    } catch (err) {
      S.skipped.push([m.name, g.name, String(err.message || err)]);
      e.dead = true;
    }
  }
}

// The entries whose prologues the agent patched itself go in the adoption log (a forked child keeps them).
function logPatched(m, entries, patches) {
  if (S.fork === null) return;
  const originals = new Map();
  for (const [fn, bytes] of patches) originals.set(fn.toString(), bytes);
  const base = m.base.toString();
  const direct = [];
  for (const e of entries) {
    const bytes = e.address !== undefined ? originals.get(e.address) : undefined;
    if (bytes === undefined) continue; // the Interceptor's hook: undone in a child, hooked there afresh
    e.direct = true;
    e.original = bytes;
    e.base = base;
    direct.push(e);
  }
  logForAdoption(direct);
}

function isCuda(name) {
  for (const p of S.libPatterns) if (p.test(name)) return true;
  return false;
}

function baseName(path) {
  return path.split(/[\\/]/).pop();
}

// The module a dlopen/LoadLibrary handle stands for: on Windows the handle is the module's base; glibc's is its
// link_map, whose l_ld (the dynamic section) lies inside the module. Null when it cannot be told.
function moduleOfHandle(handle) {
  if (handle === undefined || handle === null || handle.isNull()) return null;
  if (Process.platform === 'windows') return Process.findModuleByAddress(handle);
  if (Process.platform !== 'linux') return null;
  if (S.dlinfoFn === null) {
    const p = Module.findGlobalExportByName('dlinfo');
    S.dlinfoFn = p === null ? false : new NativeFunction(p, 'int', ['pointer', 'int', 'pointer']);
  }
  if (S.dlinfoFn === false) return null;
  const out = Memory.alloc(Process.pointerSize);
  if (S.dlinfoFn(handle, 2 /* RTLD_DI_LINKMAP */, out) !== 0) return null;
  const map = out.readPointer();
  return map.isNull() ? null : Process.findModuleByAddress(map.add(2 * Process.pointerSize).readPointer());
}

// Hook every CUDA library loaded since the last scan. `loaded` is the name a dlopen/LoadLibrary just loaded and
// `handle` what it returned: when the module list does not show it yet, it is looked up so its hooks are in
// before the call returns. By its handle first: a library loaded already under another name (the symlink
// libcufft.so.12, then its file libcufft.so.12.0.0.61) is not found by the name asked for, and Module.load of
// that second name crashed the program.
function scanModules(loaded, handle) {
  const me = Process.getCurrentThreadId();
  if (S.scanning === me) return; // re-entered from a load the scan itself made
  // Another thread is mid-scan (it let go of the JavaScript lock in a native call): wait for it, so this
  // thread never runs on into a library whose hooks are not in yet.
  while (S.scanning !== 0) Thread.sleep(0.001);
  S.scanning = me;
  try {
    const added = [];
    // Only the modules added since the last scan: listing every module at each dlopen made a program's loads
    // quadratic (1,200 libraries loaded one by one took 1.7 s under the tracer, 0.01 s without it).
    const mods = S.added.splice(0); // watchModules runs before the first scan
    if (loaded && isCuda(baseName(loaded)) && !S.seenNames.has(baseName(loaded))) {
      let m = Process.findModuleByName(baseName(loaded));
      if (m === null) {
        try { m = moduleOfHandle(handle); } catch (_) { m = null; }
      }
      if (m === null && loaded.indexOf('/') >= 0) m = Module.load(loaded);
      if (m !== null) mods.push(m);
    }
    for (const m of mods) {
      // One library by two paths (loaded as libcublasLt.so.13 through a symlink, then dlopen'd by its real file
      // name: Module.load hands back the same module under the other path) is one module: hooking its code a
      // second time patched the jumps of the first hooking and crashed the program.
      const base = m.base.toString();
      if (S.seenModules.has(m.path) || S.seenBases.has(base)) continue;
      S.seenModules.set(m.path, true);
      S.seenBases.add(base);
      S.seenNames.add(m.name);
      if (!isCuda(m.name)) continue;
      const before = S.entries.length, t0 = S.nowNs();
      try {
        hookModule(m);
      } catch (err) {
        S.skipped.push([m.name, '*', String(err.message || err)]);
      }
      // start-up cost, said in the trace's notes: milliseconds, to the microsecond
      S.hookTimes[m.name] = [Math.round((S.nowNs() - t0) / 1000) / 1000, S.entries.length - before];
      added.push({ name: m.name, path: m.path, base: m.base.toString(), size: m.size });
      sendHooks(before);
    }
    if (added.length > 0) send({ type: S.M.modules, pid: Process.id, modules: added });
  } finally {
    S.scanning = 0;
  }
}

// A program may close every descriptor it did not open itself before it execs a child: Python's subprocess
// (close_fds, the default), closefrom(), daemons. Frida's own connection to the host goes with them; its threads
// then spin on a dead descriptor and the child waits for ever at exec for a host that no longer hears it. So
// close_range() and closefrom() leave the descriptors Frida cloaks (its own) open and close the rest.
function guardAgentDescriptors() {
  if (Process.platform !== 'linux') return;
  const cr = Module.findGlobalExportByName('close_range');
  const getrlimit = Module.findGlobalExportByName('getrlimit');
  if (cr === null) return; // glibc older than 2.34: nothing to guard through these names
  const closeRange = new NativeFunction(cr, 'int', ['uint', 'uint', 'int']);
  const lim = Memory.alloc(16);
  const limitOf = () => {
    // Descriptors above the soft limit are rare (opened before it was lowered): look no further, bounded.
    let n = 1 << 20;
    if (getrlimit !== null && new NativeFunction(getrlimit, 'int', ['int', 'pointer'])(7 /* RLIMIT_NOFILE */, lim) === 0) {
      n = Math.min(n, Number(lim.readU64()));
    }
    return n;
  };
  const closeAround = (first, last, flags) => {
    const hi = Math.min(last, limitOf() - 1);
    let from = first, rc = 0;
    for (let fd = first; fd <= hi; fd++) {
      if (!Cloak.hasFileDescriptor(fd)) continue;
      if (fd > from) rc |= closeRange(from, fd - 1, flags);
      from = fd + 1;
    }
    if (from <= last) rc |= closeRange(from, last, flags);
    return rc === 0 ? 0 : -1;
  };
  const guard = (name, fn) => {
    try {
      fn();
    } catch (err) {
      // e.g. attached late with no memory free near libc: a subprocess that closes every descriptor may then hang
      S.skipped.push(['libc', name, 'not guarded: ' + String(err.message || err)]);
    }
  };
  guard('close_range', () => Interceptor.replace(cr, new NativeCallback(
    (first, last, flags) => closeAround(first >>> 0, last >>> 0, flags), 'int', ['uint', 'uint', 'int'])));
  const cf = Module.findGlobalExportByName('closefrom');
  if (cf !== null) {
    guard('closefrom', () => Interceptor.replace(cf, new NativeCallback(
      low => { closeAround(Math.max(low, 0), 0xffffffff, 0); }, 'void', ['int'])));
  }
}

// Libraries a dlopen could not load, with the loader's message (Linux). Reading dlerror() clears it for the
// program, so the agent asks the loader once more with the same name and flags, which fails the same way and puts
// the same message back for the program's own dlerror() (a failed load runs none of the library's code). Fatal errors at start-up or from lazy
// binding ("symbol lookup error", exit status 127) never reach here: the host asks the loader afterwards.
function noteFailedLoad(name, flags) {
  if (S.dlerrorFn === null) {
    const e = Module.findGlobalExportByName('dlerror'), o = Module.findGlobalExportByName('dlopen');
    if (e === null || o === null) return;
    S.dlerrorFn = new NativeFunction(e, 'pointer', []);
    S.dlopenFn = new NativeFunction(o, 'pointer', ['pointer', 'int']);
  }
  // Frida's own module tracking may have made a dl* call since (which clears the message): ask again first.
  const again = () => {
    S.rearming = true;
    try { S.dlopenFn(Memory.allocUtf8String(name), flags); } finally { S.rearming = false; }
  };
  let m = S.dlerrorFn();
  if (m.isNull()) { again(); m = S.dlerrorFn(); }
  const message = m.isNull() ? '' : m.readUtf8String();
  again();
  const key = name + '\u0000' + message;
  let r = S.loaderErrors.get(key);
  if (r === undefined) {
    if (S.loaderErrors.size >= 256) return;
    r = { requested: name, message, count: 0, t: S.nowNs().toString() };
    S.loaderErrors.set(key, r);
  }
  r.count++;
}

// dlopen finds a bare name through the calling library's RPATH or RUNPATH ($ORIGIN: the caller's own folder).
// glibc learns the caller from dlopen's return address, and the Interceptor's listener (it needs the return, to
// hook the library before dlopen returns) hands dlopen an address of Frida's, so glibc searched the program's paths
// instead: a library loading a sibling by name (libnvrtc its libnvrtc-builtins, cuDNN its sub-libraries) failed
// under the tracer only. The agent looks where the caller's paths would, in the loader's order, and passes the
// file it finds there; null when the loader would find the same without the caller (or nothing).
function callerPath(name, caller) {
  if (name === null || name.indexOf('/') >= 0 || Process.platform !== 'linux') return null;
  if (Process.findModuleByName(name) !== null) return null; // loaded already: dlopen takes it by name
  const m = Process.findModuleByAddress(caller);
  if (m === null || m.path === Process.mainModule.path) return null; // the program's own paths: searched anyway
  const paths = searchPaths(m);
  if (paths === null) return null;
  if (S.accessFn === null) S.accessFn = new NativeFunction(Module.getGlobalExportByName('access'), 'int', ['pointer', 'int']);
  const exists = dir => dir !== '' && S.accessFn(Memory.allocUtf8String(dir + '/' + name), 0 /* F_OK */) === 0;
  const origin = m.path.substring(0, m.path.lastIndexOf('/'));
  const expand = list => list.split(':').map(d => d.replace(/\$\{ORIGIN\}|\$ORIGIN/g, origin)).filter(d => d.indexOf('$') < 0);
  if (paths.rpath !== null && paths.runpath === null) {
    for (const d of expand(paths.rpath)) if (exists(d)) return d + '/' + name; // before LD_LIBRARY_PATH
    return null;
  }
  if (paths.runpath === null) return null;
  const env = getenv('LD_LIBRARY_PATH');
  if (env !== null) for (const d of env.split(/[:;]/)) if (exists(d)) return null; // found there first anyway
  for (const d of expand(paths.runpath)) if (exists(d)) return d + '/' + name;
  return null;
}

function getenv(name) {
  if (S.getenvFn === null) S.getenvFn = new NativeFunction(Module.getGlobalExportByName('getenv'), 'pointer', ['pointer']);
  const v = S.getenvFn(Memory.allocUtf8String(name));
  return v.isNull() ? null : v.readUtf8String();
}

// DT_RPATH and DT_RUNPATH of a loaded ELF module, read from its dynamic section in memory.
function searchPaths(m) {
  const b = m.base;
  if (b.readU32() !== 0x464c457f || b.add(4).readU8() !== 2) return null; // ELF64 only
  const phoff = b.add(0x20).readU64().toNumber(), phentsize = b.add(0x36).readU16(), phnum = b.add(0x38).readU16();
  let dyn = null, low = null;
  for (let i = 0; i < phnum && i < 64; i++) {
    const ph = b.add(phoff + i * phentsize);
    const type = ph.readU32(), vaddr = ph.add(0x10).readU64().toNumber();
    if (type === 1 && (low === null || vaddr < low)) low = vaddr; // PT_LOAD
    if (type === 2) dyn = vaddr; // PT_DYNAMIC
  }
  if (dyn === null || low === null) return null;
  const bias = b.sub(low - (low % 0x1000));
  let strtab = null, rpath = null, runpath = null;
  for (let d = bias.add(dyn), i = 0; i < 4096; i++, d = d.add(16)) {
    const tag = d.readS64().toNumber(), val = d.add(8).readU64();
    if (tag === 0) break;
    if (tag === 5) strtab = val; // DT_STRTAB: glibc makes it absolute in place; relative when it has not
    else if (tag === 15) rpath = val.toNumber();
    else if (tag === 29) runpath = val.toNumber();
  }
  if (strtab === null || (rpath === null && runpath === null)) return null;
  const str = ptr(strtab.toString()).compare(b) < 0 ? bias.add(strtab.toString()) : ptr(strtab.toString());
  return {
    rpath: rpath === null ? null : str.add(rpath).readUtf8String(),
    runpath: runpath === null ? null : str.add(runpath).readUtf8String(),
  };
}

function watchLoads() {
  // Hooks go in when dlopen returns: the library is then relocated and initialized.
  const wide = new Set(['LoadLibraryExW', 'LoadLibraryW']);
  const names = Process.platform === 'windows'
    ? ['LoadLibraryExW', 'LoadLibraryExA', 'LoadLibraryW', 'LoadLibraryA']
    : ['dlopen', 'dlmopen', 'android_dlopen_ext'];
  for (const n of names) {
    const p = Module.findGlobalExportByName(n);
    if (p === null) continue;
    const nameArg = n === 'dlmopen' ? 1 : 0;
    try {
      Interceptor.attach(p, {
        onEnter(args) {
          if (S.rearming) return;
          S.loading++;
          const a = args[nameArg];
          this.name = a.isNull() ? null : (wide.has(n) ? a.readUtf16String() : a.readUtf8String());
          this.flags = n === 'dlopen' ? args[1].toInt32() : null;
          if (n === 'dlopen' || n === 'dlmopen') {
            let found = null;
            try { found = callerPath(this.name, this.returnAddress); } catch (_) { /* the program's own name stands */ }
            if (found !== null) {
              this.path = Memory.allocUtf8String(found); // kept alive by the invocation until onLeave
              args[nameArg] = this.path;
            }
          }
        },
        onLeave(retval) {
          if (S.rearming) return;
          S.loading--;
          if (retval.isNull()) {
            if (this.flags !== null && this.name !== null) {
              try { noteFailedLoad(this.name, this.flags); } catch (_) { /* the program's dlopen result stands */ }
            }
            return;
          }
          // Interceptor changes made inside this callback are committed only later, so the scan patches the
          // library's prologues itself (lateScan) and they take effect before dlopen returns.
          S.lateScan = true;
          try { scanModules(this.name, retval); } finally { S.lateScan = false; }
          // cuGetProcAddress and cuGetExportTable are still hooked through the Interceptor: give it up to 50 ms
          // (Thread.sleep leaves the JavaScript runtime, which is when pending changes are flushed).
          for (let i = 0; i < 50 && S.pendingSpecials.some(committedNot); i++) Thread.sleep(0.001);
          S.pendingSpecials.length = 0;
        },
      });
    } catch (_) { /* another name for the same code */ }
  }
  // The exit code, and the last batch (an rpc.exports.dispose would do this too, but a script that has one
  // stops Frida's child gating from reporting forks).
  const exits = Process.platform === 'windows' ? ['ExitProcess', 'TerminateProcess'] : ['exit', '_exit', '_Exit'];
  const exitAddrs = new Set();
  for (const n of exits) {
    const p = Module.findGlobalExportByName(n);
    if (p === null || exitAddrs.has(p.toString())) continue;
    exitAddrs.add(p.toString());
    const isTerminate = n === 'TerminateProcess';
    Interceptor.attach(p, {
      onEnter(args) {
        if (isTerminate && !args[0].equals(ptr(-1))) return; // another process
        if (S.exiting) return;
        S.exiting = true;
        const code = (isTerminate ? args[1] : args[0]).toInt32();
        flush(true, 'exit ' + code, code);
        awaitAck(2);
      }
    });
  }
}

// The module observer keeps the list of modules added since the last scan (it reports those loaded already when
// it is attached, then each one as the loader adds it, on the loading thread, before dlopen returns). It only
// queues them, since installing hooks inside its callback crashed targets. Modules loaded by other means (a
// loader of its own, a DT_NEEDED of a dlopen'd library seen here first) get a scan of their own, which waits
// while a dlopen is under way (the library may not be relocated yet; dlopen's onLeave scans).
function watchModules() {
  Process.attachModuleObserver({
    onAdded(m) {
      S.added.push(m);
      setTimeout(() => { if (S.loading === 0) scanModules(); }, 0);
    },
    onRemoved(m) {
      const path = m.path;
      if (S.added.length > 0) S.added = S.added.filter(a => a.path !== path); // gone before its scan
      S.seenBases.delete(m.base.toString()); // another library may be loaded there later
      forgetPatches(m); /* counts of unloaded libraries stay */
    }
  });
}
