/*
 * fencegate's status page. Plain script, no framework, no build step.
 *
 * What it reads, all from the gateway that served it (paths relative to
 * /_fence/v1/ui/), each call with the user's key when there is one:
 *   ../locks?prefix=P    the locks held, waited for or in lock-delay
 *   ../events?prefix=P   what happens to them, as Server-Sent Events read
 *                        with fetch() (EventSource cannot send a key);
 *                        every event asks for a new listing (at most 4 a
 *                        second), so the page follows what happens; the
 *                        listing is asked for twice a second besides, for
 *                        what makes no event (a waiter joining a queue)
 *   ../health            Redis and the upstream
 *   ../metrics           grants and refusals (needs the metrics right)
 * Between listings the TTL bars, lock-delays and held-for times count on
 * here. Everything shown from an answer goes in as text (textContent),
 * never as markup.
 */
'use strict';

(function () {
  const KEY_STORE = 'fencegate.key';
  const MIN_REFRESH_MS = 250;      // at most 4 listings a second
  // A listing twice a second, events or not: a waiter that joins a
  // queue makes no event, nor does a lock-delay that ends.
  const POLL_MS = 500;
  const HEALTH_MS = 2000;
  const HISTORY_MS = 5 * 60 * 1000; // events shown from before the page opened
  const RATE_WINDOW_MS = 10000;
  const EVENTS_KEPT = 300;
  const EVENTS_SHOWN = 100;
  const PAGES_MAX = 2;             // listing pages of 500 locks: a longer
                                   // list is narrowed with the prefix

  const state = {
    gen: 0,              // bumped when the prefix or the key changes
    key: sessionStorage.getItem(KEY_STORE) || '',
    prefix: new URLSearchParams(location.search).get('prefix') || '',
    needKey: false,
    denied: '',          // why the listing was refused (403), or ''
    locks: [],
    listedAt: 0,         // when the listing was answered (this clock)
    truncated: false,
    events: [],
    eventIds: new Set(),
    lastId: null,
    evState: 'starting', // starting | live | reconnecting | off
    evWhy: '',
    evAbort: null,
    skew: 0,             // this clock minus the gateway's (Date header)
    health: null,
    metrics: null,       // {at, grants, refused, waiters}
    metricsPrev: null,
    metricsWhy: '',
    ttlMax: new Map(),   // "name token" -> the longest TTL seen (bar's 100%)
  };

  const $ = (id) => document.getElementById(id);

  /* An element with a class and text; the only way data gets on the page. */
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  function dur(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.floor(s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  function clock(ms) {
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, '0');
    return two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds());
  }

  /* The gateway's clock now, as far as its Date headers tell. */
  function gatewayNow() {
    return Date.now() - state.skew;
  }

  // ---- calls -------------------------------------------------------------

  function request(path, extra, signal) {
    const headers = Object.assign({}, extra || {});
    if (state.key) headers.Authorization = 'Bearer ' + state.key;
    return fetch('../' + path, {
      headers: headers, cache: 'no-store', credentials: 'same-origin', signal: signal,
    }).then((r) => {
      const date = Date.parse(r.headers.get('Date') || '');
      if (!Number.isNaN(date)) state.skew = Date.now() - date;
      return r;
    });
  }

  async function errorMessage(r) {
    try {
      const body = await r.json();
      if (body && typeof body.message === 'string') return body.message;
    } catch (e) { /* not JSON: the status says enough */ }
    return 'HTTP ' + r.status;
  }

  /* A 401 or 403 on a data call: ask for a key, or say what is missing. */
  async function refused(r, what) {
    const msg = await errorMessage(r);
    if (r.status === 401) {
      state.needKey = true;
      $('login-why').textContent = state.key
        ? 'The key was not accepted (' + msg + '). Enter another key.'
        : 'This gateway needs a key to show ' + what + '.';
      render();
      return;
    }
    // the listing and the events are refused alike: the first one says it
    if (!state.denied)
      state.denied = 'Your key may not see ' + what + ': ' + msg + '. ' +
        'Enter a prefix it may observe.';
    render();
  }

  // ---- the listing --------------------------------------------------------

  let refreshing = false;
  let refreshAgain = false;
  let refreshTimer = null;
  let lastRefresh = 0;

  /* Asks for a listing soon: at once, or when MIN_REFRESH_MS has passed
   * since the last one; requests meanwhile are one. */
  function wantRefresh() {
    if (refreshTimer) return;
    const wait = Math.max(0, lastRefresh + MIN_REFRESH_MS - Date.now());
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      refreshLocks();
    }, wait);
  }

  async function refreshLocks() {
    if (state.needKey) return;
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = true;
    lastRefresh = Date.now();
    const gen = state.gen;
    try {
      const locks = [];
      let cursor = null;
      let pages = 0;
      do {
        let q = 'locks?limit=500&prefix=' + encodeURIComponent(state.prefix);
        if (cursor) q += '&cursor=' + encodeURIComponent(cursor);
        const r = await request(q);
        if (gen !== state.gen) return;
        if (r.status === 401 || r.status === 403) {
          state.locks = [];
          await refused(r, state.prefix ? 'locks under "' + state.prefix + '"' : 'every lock');
          return;
        }
        if (r.status !== 200) {
          state.denied = 'The listing failed: ' + await errorMessage(r);
          render();
          return;
        }
        const page = await r.json();
        locks.push(...page.locks);
        cursor = page.cursor;
        pages++;
      } while (cursor && pages < PAGES_MAX);
      if (gen !== state.gen) return;
      state.denied = '';
      state.locks = locks;
      state.truncated = Boolean(cursor);
      state.listedAt = Date.now();
      for (const l of locks) {
        const k = l.name + ' ' + l.token;
        state.ttlMax.set(k, Math.max(state.ttlMax.get(k) || 0, l.ttl_ms));
      }
      renderLocks();
      render();
    } catch (e) {
      if (gen === state.gen) {
        state.denied = 'The gateway did not answer the listing.';
        render();
      }
    } finally {
      refreshing = false;
      if (refreshAgain) {
        refreshAgain = false;
        wantRefresh();
      }
    }
  }

  // ---- the events stream ---------------------------------------------------

  /* Where a first stream starts: the gateway's clock HISTORY_MS ago, as
   * an event id (<ms>-<seq>), so that the page opens with what just
   * happened instead of everything retained. */
  function startId() {
    return Math.max(0, Math.floor(gatewayNow() - HISTORY_MS)) + '-0';
  }

  async function follow(gen) {
    let backoff = 1000;
    while (gen === state.gen && !state.needKey) {
      const ctrl = new AbortController();
      state.evAbort = ctrl;
      let q = 'events?prefix=' + encodeURIComponent(state.prefix);
      const headers = { Accept: 'text/event-stream' };
      if (state.lastId) headers['Last-Event-ID'] = state.lastId;
      else q += '&after=' + encodeURIComponent(startId());
      let r;
      try {
        r = await request(q, headers, ctrl.signal);
      } catch (e) {
        if (gen !== state.gen) return;
        setEvents('reconnecting', 'the gateway does not answer');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 10000);
        continue;
      }
      if (gen !== state.gen) return;
      if (r.status === 401 || r.status === 403) {
        setEvents('off', await errorMessage(r));
        await refused(r, 'these events');
        return;
      }
      if (r.status !== 200) {
        // an older gateway has no events: asked again now and then; any
        // other failure (Redis down) sooner
        const gone = r.status === 404;
        setEvents(gone ? 'off' : 'reconnecting', gone
          ? 'this gateway does not serve them' : await errorMessage(r));
        await sleep(gone ? 30000 : backoff);
        backoff = Math.min(backoff * 2, 10000);
        continue;
      }
      backoff = 1000;
      setEvents('live', '');
      try {
        await readStream(r.body, gen);
      } catch (e) { /* cut off, or aborted: reconnect below */ }
      if (gen !== state.gen) return;
      setEvents('reconnecting', 'the stream ended');
      await sleep(1000);
    }
  }

  /* Reads Server-Sent Events off a response body until it ends. */
  async function readStream(body, gen) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done || gen !== state.gen) {
        if (!done) reader.cancel();
        return;
      }
      buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        sseBlock(block);
      }
    }
  }

  function sseBlock(block) {
    let id = null;
    let type = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line === '' || line[0] === ':') continue; // a keep-alive comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'id') id = value;
      else if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
    }
    if (id !== null) state.lastId = id;
    // "gap": events older than the start were no longer kept; nothing
    // to show of them
    if (!data.length || type === 'gap') return;
    let e;
    try {
      e = JSON.parse(data.join('\n'));
    } catch (err) {
      return; // not an event of ours
    }
    addEvent(e);
  }

  function addEvent(e) {
    if (!e || typeof e !== 'object' || typeof e.id !== 'string' ||
        typeof e.kind !== 'string' || state.eventIds.has(e.id)) return;
    state.eventIds.add(e.id);
    e.atMs = Date.parse(e.at) || gatewayNow();
    if (!e.detail || typeof e.detail !== 'object') e.detail = {};
    if (e.kind === 'granted' && e.detail.ttl_ms)
      state.ttlMax.set(e.lock + ' ' + e.token, e.detail.ttl_ms);
    state.events.push(e);
    while (state.events.length > EVENTS_KEPT)
      state.eventIds.delete(state.events.shift().id);
    wantRefresh();
    wantEventsRender();
  }

  function setEvents(s, why) {
    state.evState = s;
    state.evWhy = why;
    render();
  }

  /* Events come in bursts (the history at the start, a busy lock): the
   * list is drawn once per burst, right after it. */
  let eventsTimer = null;
  function wantEventsRender() {
    if (eventsTimer) return;
    eventsTimer = setTimeout(() => {
      eventsTimer = null;
      renderEvents();
      render();
    }, 30);
  }

  // ---- health and metrics -----------------------------------------------

  function parseMetrics(text) {
    const sums = {};
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const v = Number(m[3]);
      if (Number.isNaN(v)) continue;
      let name = m[1];
      if (name === 'fencegate_waiters' && m[2] && m[2].indexOf('kind="acquire"') >= 0)
        name = 'waiters_acquire';
      sums[name] = (sums[name] || 0) + v;
    }
    return {
      at: Date.now(),
      grants: sums.fencegate_lock_grants_total || 0,
      refused: sums.fencegate_fence_refused_total || 0,
      waiters: sums.waiters_acquire || 0,
    };
  }

  async function refreshHealth() {
    try {
      const r = await request('health');
      state.health = await r.json();
    } catch (e) {
      state.health = { redis: 'unknown', upstream: 'unknown', unreachable: true };
    }
    try {
      const r = await request('metrics');
      if (r.status === 200) {
        state.metricsPrev = state.metrics;
        state.metrics = parseMetrics(await r.text());
        state.metricsWhy = '';
      } else {
        state.metrics = state.metricsPrev = null;
        state.metricsWhy = r.status === 403 ? 'not permitted for this key'
          : r.status === 401 ? 'need a key' : 'HTTP ' + r.status;
      }
    } catch (e) {
      state.metrics = state.metricsPrev = null;
      state.metricsWhy = 'no answer';
    }
    render();
  }

  // ---- what is wrong ------------------------------------------------------

  function recentRefusals(windowMs) {
    const since = gatewayNow() - windowMs;
    return state.events.filter((e) => e.kind === 'refused' && e.atMs >= since);
  }

  function refusalCount(list) {
    return list.reduce((n, e) => n + (Number(e.detail.count) || 1), 0);
  }

  /* Grants and refusals a second: from the events this key sees while
   * the stream is live, else from this gateway's metrics. */
  function rates() {
    if (state.evState === 'live') {
      const since = gatewayNow() - RATE_WINDOW_MS;
      let g = 0;
      for (const e of state.events)
        if (e.kind === 'granted' && e.atMs >= since) g++;
      return {
        grants: g / (RATE_WINDOW_MS / 1000),
        refused: refusalCount(recentRefusals(RATE_WINDOW_MS)) / (RATE_WINDOW_MS / 1000),
        from: 'Rates: the events this page sees, over the last 10 s.',
      };
    }
    const m = state.metrics;
    const p = state.metricsPrev;
    if (m && p && m.at > p.at) {
      const dt = (m.at - p.at) / 1000;
      return {
        grants: Math.max(0, m.grants - p.grants) / dt,
        refused: Math.max(0, m.refused - p.refused) / dt,
        from: "Rates: this gateway's metrics.",
      };
    }
    return { grants: null, refused: null, from: state.metricsWhy
      ? 'Metrics: ' + state.metricsWhy + '.' : '' };
  }

  function verdict() {
    const bad = [];
    const warn = [];
    const h = state.health;
    if (h && h.unreachable) bad.push('the gateway does not answer');
    else if (h) {
      if (h.redis !== 'up') bad.push('Redis is ' + h.redis);
      if (h.upstream === 'down') bad.push('the upstream is down');
    }
    const ref = refusalCount(recentRefusals(60000));
    if (ref) bad.push(ref + (ref === 1 ? ' write refused' : ' writes refused') + ' in the last minute');
    if (state.needKey) warn.push('a key is needed');
    if (state.denied) warn.push('the listing is refused');
    const waiting = state.locks.filter((l) => l.waiters.length).length;
    if (waiting) warn.push(waiting + (waiting === 1 ? ' lock has' : ' locks have') + ' waiters');
    if (state.evState === 'reconnecting') warn.push('the event stream is reconnecting');
    if (bad.length) return { cls: 'bad', text: bad.concat(warn).join(' · ') };
    if (warn.length) return { cls: 'warn', text: warn.join(' · ') };
    if (!h) return { cls: 'unknown', text: 'Loading…' };
    const held = state.locks.filter((l) => l.holders.length).length;
    return { cls: 'ok', text: 'All well: Redis up, upstream ' + h.upstream + ', ' +
      held + (held === 1 ? ' lock held' : ' locks held') };
  }

  // ---- rendering ------------------------------------------------------------

  function tile(id, value, cls) {
    const t = $(id);
    t.className = 'tile' + (cls ? ' ' + cls : '');
    t.querySelector('.v').textContent = value;
  }

  function render() {
    const v = verdict();
    const vd = $('verdict');
    vd.className = 'verdict ' + v.cls;
    vd.textContent = v.text;

    $('login').hidden = !state.needKey;
    $('forget').hidden = !state.key;
    const notice = $('notice');
    notice.hidden = !state.denied;
    notice.textContent = state.denied;

    const h = state.health;
    if (h) {
      tile('t-redis', h.redis, h.redis === 'up' ? 'ok' : 'bad');
      tile('t-upstream', h.upstream, h.upstream === 'down' ? 'bad'
        : h.upstream === 'up' ? 'ok' : 'off');
    }
    const evText = { starting: 'starting', live: 'live', reconnecting: 'reconnecting', off: 'off' };
    tile('t-events', evText[state.evState] + (state.evWhy ? ': ' + state.evWhy : ''),
      state.evState === 'live' ? 'ok' : state.evState === 'off' ? 'off' : 'warn');
    const r = rates();
    tile('t-grants', r.grants === null ? '–' : r.grants.toFixed(1), r.grants === null ? 'off' : '');
    tile('t-refusals', r.refused === null ? '–' : r.refused.toFixed(1),
      r.refused ? 'bad' : r.refused === null ? 'off' : '');
    const waiters = state.locks.reduce((n, l) => n + l.waiters.length, 0);
    tile('t-waiters', String(waiters), waiters ? 'warn' : '');
    $('rates-from').textContent = r.from + (r.from && state.metricsWhy && state.evState === 'live'
      ? ' Metrics: ' + state.metricsWhy + '.' : '');

    renderRefusals();
    $('updated').textContent = state.listedAt
      ? 'Listing as of ' + clock(state.listedAt) + (state.truncated ? ' (the first ' +
        state.locks.length + ' locks only)' : '')
      : 'No listing yet';
  }

  function renderRefusals() {
    const list = recentRefusals(HISTORY_MS);
    const box = $('refusals');
    box.hidden = !list.length;
    if (!list.length) return;
    const n = refusalCount(list);
    const e = list[list.length - 1];
    const d = e.detail;
    const parts = [n + (n === 1 ? ' write' : ' writes') + ' refused in the last 5 min. Newest: ' +
      (d.code || 'refused')];
    if (d.method || d.path) parts.push((d.method || '') + ' ' + (d.path || ''));
    if (e.lock) parts.push('lock ' + e.lock);
    if (e.token !== null && e.token !== undefined) parts.push('token ' + e.token);
    if (e.principal) parts.push('principal ' + e.principal);
    if (e.client) parts.push('from ' + e.client);
    parts.push(dur(gatewayNow() - e.atMs) + ' ago');
    $('refusals-text').textContent = parts.join(' · ');
  }

  let ticking = [];   // what the ticker updates between listings

  function person(role, p, ms, verb) {
    const li = el('li', role.startsWith('holder') ? 'holder' : 'waiter');
    li.appendChild(el('span', 'role', role));
    li.appendChild(el('span', 'who', p.owner || '(no owner)'));
    if (p.principal) li.appendChild(el('span', 'dim', 'principal ' + p.principal));
    if (p.client) li.appendChild(el('span', 'dim', 'from ' + p.client));
    const t = el('span', 'dim', verb + ' ' + dur(ms));
    li.appendChild(t);
    ticking.push((dt) => { t.textContent = verb + ' ' + dur(ms + dt); });
    return li;
  }

  function renderLocks() {
    ticking = [];
    const ul = $('locks');
    ul.replaceChildren();
    // the contended first, then in name order as listed
    const locks = state.locks.slice().sort((a, b) => b.waiters.length - a.waiters.length);
    for (const l of locks) {
      const held = l.holders.length > 0;
      const li = el('li', 'lock');
      li.dataset.lock = l.name;
      const head = el('div', 'lock-head');
      head.appendChild(el('span', 'lock-name mono', l.name));
      if (held) head.appendChild(el('span', 'badge held', l.mode));
      if (l.waiters.length)
        head.appendChild(el('span', 'badge waiting', l.waiters.length + ' waiting'));
      if (l.delay_ms > 0) head.appendChild(el('span', 'badge delay', 'lock-delay'));
      if (l.token !== null) head.appendChild(el('span', 'token mono', 'token ' + l.token));
      li.appendChild(head);

      if (held) {
        const ttl = el('div', 'ttl');
        const bar = el('div', 'bar');
        const fill = el('div', 'fill');
        bar.appendChild(fill);
        const left = el('span', 'left');
        ttl.appendChild(bar);
        ttl.appendChild(left);
        li.appendChild(ttl);
        const max = Math.max(state.ttlMax.get(l.name + ' ' + l.token) || 0, l.ttl_ms, 1);
        let asked = false;
        const tick = (dt) => {
          const rest = Math.max(0, l.ttl_ms - dt);
          fill.style.width = (100 * rest / max).toFixed(1) + '%';
          ttl.classList.toggle('low', rest < max / 5);
          left.textContent = rest > 0 ? 'TTL ' + dur(rest) + ' left' : 'TTL ended';
          if (rest === 0 && !asked) {
            asked = true;
            wantRefresh();
          }
        };
        tick(0);
        ticking.push(tick);
      }
      if (l.delay_ms > 0) {
        const d = el('div', 'ttl');
        const t = el('span', 'left', '');
        d.appendChild(t);
        li.appendChild(d);
        let asked = false;
        const tick = (dt) => {
          const rest = Math.max(0, l.delay_ms - dt);
          t.textContent = 'lock-delay ' + dur(rest) + ' left';
          if (rest === 0 && !asked) {
            asked = true;
            wantRefresh();
          }
        };
        tick(0);
        ticking.push(tick);
      }
      const people = el('ul', 'people');
      for (const h of l.holders) people.appendChild(person('holder', h, h.held_ms, 'held for'));
      l.waiters.forEach((w, i) => {
        people.appendChild(person('waiter ' + (i + 1), w, w.waited_ms, 'waiting'));
      });
      if (people.children.length) li.appendChild(people);
      ul.appendChild(li);
    }
    $('locks-empty').hidden = state.locks.length > 0 || Boolean(state.denied) || state.needKey;
    $('locks-count').textContent = state.truncated
      ? '(the first ' + state.locks.length + '; a prefix shows the rest)'
      : state.locks.length ? '(' + state.locks.length + ')' : '';
  }

  const KIND_TEXT = {
    granted: 'granted', released: 'released', expired: 'expired', broken: 'broken',
    given_back: 'given back', lease_lost: 'lease lost', refused: 'REFUSED',
  };

  function renderEvents() {
    const ol = $('events');
    ol.replaceChildren();
    const shown = state.events.slice(-EVENTS_SHOWN).reverse();
    for (const e of shown) {
      const kind = Object.prototype.hasOwnProperty.call(KIND_TEXT, e.kind) ? e.kind : 'other';
      const li = el('li', 'ev ev-' + kind);
      li.dataset.kind = String(e.kind);
      li.dataset.lock = String(e.lock);
      li.appendChild(el('span', 'at', clock(e.atMs)));
      li.appendChild(el('span', 'kind', KIND_TEXT[kind] || String(e.kind)));
      const what = el('span', 'what');
      what.appendChild(el('span', 'mono', e.lock));
      const d = e.detail;
      const bits = [];
      if (e.kind === 'refused') {
        bits.push((d.code || '') + ' ' + (d.method || '') + ' ' + (d.path || ''));
        if (d.count > 1) bits.push('×' + d.count);
      }
      if (e.token !== null && e.token !== undefined) bits.push('token ' + e.token);
      if (e.owner) bits.push(e.owner);
      if (e.principal) bits.push('principal ' + e.principal);
      if (e.client) bits.push('from ' + e.client);
      if (e.kind === 'granted' && d.waited) bits.push('after waiting');
      if (e.kind === 'broken' && d.by) bits.push('by ' + d.by);
      if (e.kind === 'given_back' && d.reason) bits.push(d.reason);
      what.appendChild(el('span', 'dim', ' ' + bits.join(' · ')));
      li.appendChild(what);
      ol.appendChild(li);
    }
    $('events-empty').hidden = state.events.length > 0;
    $('events-count').textContent = state.events.length ? '(' + state.events.length + ')' : '';
  }

  // ---- start, and starting over --------------------------------------------

  /* The prefix or the key changed: everything shown is dropped and read
   * again, the event stream included. */
  function restart() {
    state.gen++;
    if (state.evAbort) state.evAbort.abort();
    state.needKey = false;
    state.denied = '';
    state.locks = [];
    state.events = [];
    state.eventIds = new Set();
    state.lastId = null;
    state.evState = 'starting';
    state.evWhy = '';
    renderLocks();
    renderEvents();
    render();
    refreshLocks();
    refreshHealth();
    follow(state.gen);
  }

  function useKey() {
    const k = $('key').value.trim();
    if (!k) return;
    state.key = k;
    sessionStorage.setItem(KEY_STORE, k);
    $('key').value = '';
    restart();
  }

  function start() {
    $('prefix').value = state.prefix;
    let typing = null;
    $('prefix').addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        state.prefix = $('prefix').value;
        const url = new URL(location.href);
        if (state.prefix) url.searchParams.set('prefix', state.prefix);
        else url.searchParams.delete('prefix');
        history.replaceState(null, '', url.pathname + url.search);
        restart();
      }, 400);
    });
    $('use-key').addEventListener('click', useKey);
    $('key').addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') useKey();
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(KEY_STORE);
      state.key = '';
      restart();
    });

    setInterval(() => {
      const dt = Date.now() - state.listedAt;
      for (const t of ticking) t(dt);
    }, 250);
    setInterval(() => {
      if (!document.hidden) refreshHealth();
    }, HEALTH_MS);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) {
        wantRefresh();
        refreshHealth();
      }
    });
    setInterval(() => {
      // a tab nobody looks at costs the gateway nothing but its stream
      if (!document.hidden && Date.now() - lastRefresh >= POLL_MS) wantRefresh();
    }, 250);
    restart();
  }

  start();
})();
