// Entry points hooked in JavaScript (cuGetProcAddress, cuGetExportTable: their arguments matter after the
// call), counting thunks for the pointers cuGetProcAddress hands out, and --events listeners.

// cuGetProcAddress(_v2) and cuGetExportTable: a few hundred calls at start-up, hooked in JavaScript because
// they need their arguments after the call.
function jsCounts(e) {
  if (e.js === null) e.js = { calls: 0, first: 0, time: 0, statuses: new Map(), callers: new Map() };
  return e.js;
}

function countJs(e, t0, status, ret) {
  const j = jsCounts(e);
  j.calls++;
  if (j.first === 0) j.first = t0;
  j.time += Number(S.nowNs() - t0);
  if (status !== 0) j.statuses.set(status, (j.statuses.get(status) || 0) + 1);
  const who = callerName(ret);
  j.callers.set(who, (j.callers.get(who) || 0) + 1);
}

function committedNot(p) {
  const now = new Uint8Array(p[0].readByteArray(5));
  for (let i = 0; i < 5; i++) if (now[i] !== p[1][i]) return false;
  return true;
}

function hookSpecial(m, address, name, names) {
  if (S.lateScan) S.pendingSpecials.push([address, new Uint8Array(address.readByteArray(5))]);
  const e = newEntry(m.name, m.path, name, names);
  S.hookedAddrs.set(address.toString(), e.id);
  if (name.startsWith('cuGetProcAddress')) {
    const v2 = name === 'cuGetProcAddress_v2';
    Interceptor.attach(address, {
      onEnter(args) {
        this.t0 = S.nowNs();
        this.sym = args[0].isNull() ? '' : args[0].readCString();
        this.pfn = args[1];
        this.version = args[2].toInt32();
        this.flags = args[3].toString();
      },
      onLeave(retval) {
        const status = retval.toInt32();
        let p = NULL;
        try { if (!this.pfn.isNull()) p = this.pfn.readPointer(); } catch (_) { p = NULL; }
        const found = status === 0 && !p.isNull();
        const key = [this.sym, this.version, this.flags, found, name].join('|');
        const l = S.lookups.get(key);
        if (l) l.count++;
        else S.lookups.set(key, { symbol: this.sym, version: this.version, flags: this.flags, found, count: 1, via: name });
        if (found) {
          const t = thunkForPointer(p, this.sym);
          if (t !== null) {
            this.pfn.writePointer(t);
            // The detail listener on a new thunk's stub is committed when this thread leaves JavaScript:
            // wait for it (at most 50 ms) so the first calls through the pointer record their details too.
            for (let i = 0; i < 50 && S.pendingSpecials.some(committedNot); i++) Thread.sleep(0.001);
            S.pendingSpecials.length = 0;
          }
        }
        countJs(e, this.t0, status, this.returnAddress);
      }
    });
  } else if (name === 'cuGetExportTable') {
    Interceptor.attach(address, {
      onEnter(args) {
        this.t0 = S.nowNs();
        let uuid = null;
        try {
          const b = new Uint8Array(args[1].readByteArray(16));
          const h = Array.from(b, x => ('0' + x.toString(16)).slice(-2)).join('');
          uuid = (h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' +
            h.slice(20)).toUpperCase();
        } catch (_) { uuid = null; }
        this.uuid = uuid;
      },
      onLeave(retval) {
        const status = retval.toInt32();
        if (this.uuid !== null) {
          let t = S.exportTables.get(this.uuid);
          if (!t) { t = { uuid: this.uuid, count: 0, statuses: {} }; S.exportTables.set(this.uuid, t); }
          t.count++;
          t.statuses[status] = (t.statuses[status] || 0) + 1;
        }
        countJs(e, this.t0, status, this.returnAddress);
      }
    });
  } else if (!hookGpuModuleSpecial(address, name, e)) {
    throw new Error('no special hook for ' + name);
  }
}

// A pointer handed out by cuGetProcAddress that is no hooked export (under ZLUDA or a newer driver it may be
// an internal function): give the caller a counting thunk instead.
function thunkForPointer(p, symbol) {
  const k = p.toString();
  if (S.hookedAddrs.has(k)) return null; // an export we already count
  const known = S.procThunks.get(k);
  if (known !== undefined) return known;
  if (!IS_X64) return null;
  const per = BLOCK_SIZE;
  if (S.pool === null || S.pool.used === S.pool.cap) {
    const cap = 256;
    // Callers keep these pointers, also in a forked child: memory that Frida does not free there.
    let base = ownMap(cap * per), lent = false;
    if (base === null) { base = Memory.alloc(cap * per); S.keep.push(base); Memory.protect(base, cap * per, 'rwx'); lent = true; }
    S.pool = { base, at: num(base), used: 0, cap, lent };
  }
  const mod = Process.findModuleByAddress(p);
  const e = newEntry(mod ? mod.name : '[anonymous]', mod ? mod.path : '', symbol, [symbol]);
  e.slot = allocCounter();
  noteCounterUsed();
  newDetail(e);
  e.viaProc = true;
  const n = S.pool.used++;
  const L = blockAt(S.pool.base.add(n * per), S.pool.at + n * per);
  const slot = writeThunk(L, e, p);
  if (S.cfg.detailCalls !== 0 && S.dispatch === null) {
    S.pendingSpecials.push([L.stub, new Uint8Array(stubBytes(num(p), e).slice(0, 5))]);
  }
  S.procThunks.set(k, slot);
  e.procKey = k;
  e.thunk = slot.toString();
  e.stubAt = L.stub.toString();
  if (!S.pool.lent) logForAdoption([e]);
  sendHooks(e.id);
  return slot;
}

function attachEvents(target, e) {
  Interceptor.attach(target, {
    onEnter(args) {
      this.t0 = S.nowNs();
      this.a = [args[0], args[1], args[2], args[3], args[4], args[5]].map(x => x.toString());
    },
    onLeave(retval) {
      if (S.events.length >= 100000) { S.eventsDropped++; return; }
      S.events.push([this.t0.toString(), this.threadId, e.id, this.a, retval.toInt32()]);
    }
  });
}
