// vigil's live page: one Server-Sent Events stream on /api/watch (snapshot, then committed
// changes), no polling. The lease countdown and "ago" times are redrawn locally every second.
// The stream is read with fetch rather than EventSource, which cannot send the Authorization
// header that a server with auth on asks for (the key is kept in sessionStorage).
"use strict";

const $ = (sel) => document.querySelector(sel);
const MAX_ROWS = 500, MAX_LOG = 300, MAX_TRANSITIONS = 50;

const view = {
  namespace: "", query: "",
  workers: new Map(),     // instance key → WorkerLiveness (protojson)
  building: null,         // the snapshot being received (replaces workers at SNAPSHOT_END)
  transitions: new Map(), // instance key → [{type, time}], newest first
  selected: "", source: null, open: "",
};

const short = (s) => (s || "").replace(/^(LIVENESS_STATE|WORKER_EVENT_TYPE|INACTIVE_REASON)_/, "");
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const ms = (t) => (t ? Date.parse(t) : NaN);
function ago(t) {
  const d = (Date.now() - ms(t)) / 1000;
  if (!isFinite(d)) return "–";
  if (d < 1) return "now";
  if (d < 90) return Math.round(d) + " s ago";
  if (d < 5400) return Math.round(d / 60) + " min ago";
  return Math.round(d / 3600) + " h ago";
}
const clock = (t) => new Date(ms(t)).toLocaleTimeString();
const reasonText = (w) => ({ LEASE_EXPIRED: "lease expired", SHUTDOWN: "shut down", CONNECTION_LOST: "connection lost" }[short(w.inactiveReason)] || "–");
const when = (t) => (t ? `${new Date(ms(t)).toLocaleString()} (${ago(t)})` : "");
const hostOf = (w) => w.lastHeartbeat?.hostInfo?.hostName || "";

// Credentials: with auth on, /api/ needs a cluster admin's API key or token.
const auth = {
  token: sessionStorage.getItem("vigil.token") || "",
  headers() { return this.token ? { Authorization: "Bearer " + this.token } : {}; },
  set(token) {
    this.token = token;
    if (token) sessionStorage.setItem("vigil.token", token); else sessionStorage.removeItem("vigil.token");
    $("#signout").hidden = !token;
  },
};

class AuthError extends Error {}

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: { ...auth.headers(), ...(opts.headers || {}) }, cache: "no-store" });
  if (r.status === 401 || r.status === 403) throw new AuthError((await r.text()).trim());
  return r;
}

// askForKey shows the sign-in form; submitting it starts the page over with the key.
function askForKey(message) {
  if (view.source) view.source.abort();
  setConn("signed out", "down");
  $("#auth-message").textContent = auth.token ? `Refused: ${message}` : "This server has authentication on: enter a cluster admin's API key or token.";
  $("#auth").hidden = false;
  $("#auth-key").value = "";
  $("#auth-key").focus();
}

// readEvents reads a Server-Sent Events body, calling on(type, id, data) per event; id is
// null when the event named none.
async function readEvents(body, on) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    for (let i; (i = buf.indexOf("\n\n")) >= 0;) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let id = null, type = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? "" : line.slice(c + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "id") id = v; else if (field === "event") type = v; else if (field === "data") data.push(v);
      }
      if (data.length && on(type, id, data.join("\n")) === false) return;
      if (!data.length && id !== null) on("", id, "");
    }
  }
}

function connect() {
  if (view.source) view.source.abort();
  view.workers = new Map();
  view.building = null;
  render();
  const params = new URLSearchParams({ namespace: view.namespace, query: view.query });
  const ctl = new AbortController();
  view.source = ctl;
  setConn("connecting…", "");
  (async () => {
    let cursor = "", stopped = false;
    while (!ctl.signal.aborted && !stopped) {
      try {
        const r = await api("/api/watch?" + params, { signal: ctl.signal, headers: cursor ? { "Last-Event-ID": cursor } : {} });
        if (!r.ok) throw new Error((await r.text()).trim());
        setConn("live", "live");
        await readEvents(r.body, (type, id, data) => {
          if (id !== null) cursor = id; // empty for RESYNC and SNAPSHOT: a break starts over
          if (type === "failure") {
            stopped = true;
            setConn("stopped", "down");
            showError(JSON.parse(data).message);
            return false;
          }
          if (type === "message") onEvent(JSON.parse(data));
        });
      } catch (e) {
        if (ctl.signal.aborted) return;
        if (e instanceof AuthError) { askForKey(e.message); return; }
      }
      if (stopped || ctl.signal.aborted) return;
      // A snapshot cut short is dropped: the stream starts it over (its events carry no cursor).
      view.building = null;
      setConn("reconnecting…", "down");
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
}

function setConn(text, cls) { const c = $("#conn"); c.textContent = text; c.className = "conn " + cls; }
function showError(msg) { const e = $("#error"); e.textContent = msg || ""; e.hidden = !msg; }

function onEvent(ev) {
  const type = short(ev.type);
  const w = ev.worker, key = w?.workerInstanceKey;
  switch (type) {
    case "RESYNC":
      view.building = new Map();
      log(ev, type, ev.reason);
      return;
    case "SNAPSHOT":
      (view.building ??= new Map()).set(key, w);
      return;
    case "SNAPSHOT_END":
      view.workers = view.building ?? new Map();
      view.building = null;
      showError("");
      render();
      return;
  }
  const target = view.building ?? view.workers;
  if (type === "HOST_ONLINE" || type === "HOST_OFFLINE") {
    log(ev, type, ev.hostName || "(no host name)");
    return;
  }
  if (!w) return;
  if (type === "DELETED" || type === "CLEANED_UP") target.delete(key);
  else target.set(key, w);
  if (type !== "HEARTBEAT") {
    const list = view.transitions.get(key) ?? [];
    list.unshift({ type, time: ev.time, extra: detailOf(ev, type) });
    view.transitions.set(key, list.slice(0, MAX_TRANSITIONS));
    log(ev, type, w.lastHeartbeat?.workerIdentity || key, detailOf(ev, type), key);
  }
  render(type === "HEARTBEAT" ? "" : key);
  if (view.open === key) openDetail(key, false);
}

function detailOf(ev, type) {
  if (type === "INACTIVE") return short(ev.inactiveReason);
  if (type === "ACTIVITIES_RESCHEDULED") return ev.count + " activities";
  return "";
}

function log(ev, type, subject, extra, key) {
  const li = document.createElement("li");
  li.dataset.type = type;
  if (key) li.title = key;
  li.innerHTML = `<time>${esc(clock(ev.time))}</time><span class="t ${type}">${type}</span> <span class="key">${esc(subject)}</span> ${esc(extra || "")}`;
  const ol = $("#log");
  ol.prepend(li);
  while (ol.children.length > MAX_LOG) ol.lastChild.remove();
}

let pending = false, flashKey = "";
function render(flash) {
  if (flash) flashKey = flash;
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => { pending = false; draw(); flashKey = ""; });
}

function sorted() {
  return [...view.workers.values()].sort((a, b) =>
    (a.state === b.state ? 0 : a.state === "LIVENESS_STATE_ACTIVE" ? -1 : 1) ||
    hostOf(a).localeCompare(hostOf(b)) || a.workerInstanceKey.localeCompare(b.workerInstanceKey));
}

function draw() {
  // Hosts: online while any of its workers is ACTIVE.
  const hosts = new Map();
  for (const w of view.workers.values()) {
    const h = hosts.get(hostOf(w)) ?? { name: hostOf(w), active: 0, inactive: 0 };
    if (w.state === "LIVENESS_STATE_ACTIVE") h.active++; else h.inactive++;
    hosts.set(h.name, h);
  }
  const hostList = [...hosts.values()].sort((a, b) => (b.active > 0) - (a.active > 0) || a.name.localeCompare(b.name));
  $("#hosts").innerHTML = hostList.map((h) =>
    `<div class="host ${h.active ? "online" : "offline"}" data-host="${esc(h.name)}" data-online="${h.active > 0}">
      <div class="name">${esc(h.name || "(no host name)")}</div>
      <div class="meta">${h.active ? "online" : "offline"} · ${h.active} active · ${h.inactive} inactive</div></div>`).join("");
  $("#host-count").textContent = `${hostList.filter((h) => h.active).length} online / ${hostList.length}`;

  const all = sorted(), rows = all.slice(0, MAX_ROWS);
  $("#worker-count").textContent = all.length > MAX_ROWS ? `showing ${MAX_ROWS} of ${all.length}: narrow the filter` : `${all.length}`;
  $("#empty").hidden = all.length > 0;
  $("#workers tbody").innerHTML = rows.map((w) => {
    const st = short(w.state), hb = w.lastHeartbeat || {};
    return `<tr data-key="${esc(w.workerInstanceKey)}" data-state="${st}" class="${w.workerInstanceKey === view.selected ? "sel" : ""} ${w.workerInstanceKey === flashKey ? "flash" : ""}" tabindex="-1">
      <td><span class="badge ${st}">${st}</span></td>
      <td><div class="key">${esc(w.workerInstanceKey)}</div><div class="ident">${esc(hb.workerIdentity)}</div></td>
      <td>${esc(hostOf(w))}</td>
      <td>${esc(hb.taskQueue)}</td>
      <td>${esc([hb.sdkName, hb.sdkVersion].filter(Boolean).join(" "))}</td>
      <td class="lease-cell" data-deadline="${esc(w.leaseDeadline)}" data-duration="${esc(w.leaseDuration)}" data-active="${st === "ACTIVE"}" data-reason="${esc(reasonText(w))}" data-suspect="${w.suspectDeadline ? "suspect: connection closed" : ""}"></td>
      <td class="ago" data-t="${esc(w.lastHeartbeatTime)}"></td>
      <td class="num">${esc(w.boundActivityCount || "0")}</td></tr>`;
  }).join("");
  tick();
}

// tick redraws what depends on the clock only.
function tick() {
  for (const td of document.querySelectorAll("td.lease-cell")) {
    if (td.dataset.active !== "true") { td.textContent = td.dataset.reason; continue; }
    const left = (ms(td.dataset.deadline) - Date.now()) / 1000;
    if (!(left > 0)) {
      // Heartbeats reach the page at most every few seconds (coalesced): a lease that ran out
      // here was most likely renewed already; the server says INACTIVE when it was not.
      td.innerHTML = `<span class="lease due"><i></i></span><span class="muted">renewing</span>`;
      continue;
    }
    const total = parseFloat(td.dataset.duration) || left;
    const pct = Math.min(100, (left / total) * 100);
    td.innerHTML = `<span class="lease ${pct < 34 ? "low" : ""}"><i style="width:${pct}%"></i></span>${left.toFixed(1)} s`;
    if (td.dataset.suspect) td.innerHTML += ` <span class="muted">${esc(td.dataset.suspect)}</span>`;
  }
  for (const td of document.querySelectorAll("td.ago")) td.textContent = ago(td.dataset.t);
}
setInterval(tick, 1000);

async function openDetail(key, focus = true) {
  view.open = key;
  const dlg = $("#detail");
  dlg.hidden = false;
  $("#detail-title").textContent = key;
  const params = new URLSearchParams({ namespace: view.namespace, key });
  let w;
  try {
    const r = await api("/api/worker?" + params);
    if (!r.ok) throw new Error(await r.text());
    w = (await r.json()).worker;
  } catch (e) {
    w = view.workers.get(key);
    if (!w) { $("#detail-fields").innerHTML = `<dt>error</dt><dd>${esc(e.message)}</dd>`; return; }
  }
  const hb = w.lastHeartbeat || {};
  const fields = [
    ["State", short(w.state)], ["Identity", hb.workerIdentity], ["Host", hostOf(w)], ["Task queue", hb.taskQueue],
    ["SDK", [hb.sdkName, hb.sdkVersion].filter(Boolean).join(" ")], ["Lease deadline", when(w.leaseDeadline)], ["Lease duration", w.leaseDuration],
    ["Last heartbeat", when(w.lastHeartbeatTime)], ["First heartbeat", when(w.firstHeartbeatTime)],
    ["Inactive reason", short(w.inactiveReason)], ["Inactive since", when(w.inactiveTime)], ["Cleanup", when(w.cleanupTime)],
    ["Resurrections", w.resurrectionCount || "0"], ["Drain requested", w.drainRequested ? "yes" : "no"],
    ["Pending reschedules", w.pendingRescheduleActivities || "0"],
  ];
  $("#detail-fields").innerHTML = fields.filter(([, v]) => v).map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("");
  // Transitions seen live, plus those the record itself dates.
  const seen = [...(view.transitions.get(key) ?? [])];
  const known = [["REGISTERED", w.firstHeartbeatTime], ["INACTIVE", w.inactiveTime]];
  for (const [type, time] of known) if (time && !seen.some((t) => t.type === type && t.time >= time)) seen.push({ type, time, extra: "(from the record)" });
  seen.sort((a, b) => ms(b.time) - ms(a.time));
  $("#detail-transitions").innerHTML = seen.map((t) =>
    `<li><time>${esc(new Date(ms(t.time)).toLocaleString())}</time><span class="t ${t.type}">${t.type}</span> ${esc(t.extra || "")}</li>`).join("") || "<li>none seen yet</li>";
  const bound = w.boundActivities || [];
  $("#detail-bound-count").textContent = w.boundActivityCount || "0";
  $("#detail-bound tbody").innerHTML = bound.map((b) =>
    `<tr><td class="key">${esc(b.activityId)}</td><td class="key">${esc(b.runId)}</td><td class="num">${esc(b.stamp)}</td><td>${esc(clock(b.boundTime))}</td></tr>`).join("")
    || `<tr><td colspan="4" class="empty">none</td></tr>`;
  if (focus) $("#detail-close").focus();
}

function closeDetail() { $("#detail").hidden = true; view.open = ""; }

function move(delta) {
  const keys = sorted().slice(0, MAX_ROWS).map((w) => w.workerInstanceKey);
  if (!keys.length) return;
  const i = keys.indexOf(view.selected);
  view.selected = keys[Math.max(0, Math.min(keys.length - 1, i < 0 ? 0 : i + delta))];
  draw();
  document.querySelector("tr.sel")?.scrollIntoView({ block: "nearest" });
}

document.addEventListener("keydown", (e) => {
  if (!$("#auth").hidden) return;
  if (e.target.matches("input, select")) { if (e.key === "Escape") e.target.blur(); return; }
  if (e.key === "/") { e.preventDefault(); $("#filter").focus(); }
  else if (e.key === "Escape") closeDetail();
  else if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); move(1); }
  else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); move(-1); }
  else if (e.key === "Enter" && view.selected) openDetail(view.selected);
});
$("#workers tbody").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-key]");
  if (tr) { view.selected = tr.dataset.key; openDetail(tr.dataset.key); }
});
$("#detail-close").addEventListener("click", closeDetail);
$("#detail").addEventListener("click", (e) => { if (e.target.id === "detail") closeDetail(); });
$("#filter-form").addEventListener("submit", (e) => {
  e.preventDefault();
  view.query = $("#filter").value.trim();
  syncURL();
  connect();
});
$("#namespace").addEventListener("change", (e) => { view.namespace = e.target.value; syncURL(); connect(); });

function syncURL() {
  const p = new URLSearchParams();
  if (view.namespace !== "default") p.set("namespace", view.namespace);
  if (view.query) p.set("query", view.query);
  history.replaceState(null, "", p.toString() ? "?" + p : location.pathname);
}

async function start() {
  const p = new URLSearchParams(location.search);
  view.namespace = p.get("namespace") || "default";
  view.query = p.get("query") || "";
  $("#filter").value = view.query;
  let names = ["default"];
  try {
    names = await (await api("/api/namespaces")).json();
  } catch (e) {
    if (e instanceof AuthError) { askForKey(e.message); return; }
    /* otherwise keep default */
  }
  if (!names.includes(view.namespace)) names.push(view.namespace);
  $("#namespace").innerHTML = names.map((n) => `<option ${n === view.namespace ? "selected" : ""}>${esc(n)}</option>`).join("");
  connect();
}

$("#auth-form").addEventListener("submit", (e) => {
  e.preventDefault();
  auth.set($("#auth-key").value.trim());
  $("#auth").hidden = true;
  start();
});
$("#signout").addEventListener("click", () => { auth.set(""); askForKey(""); });
$("#signout").hidden = !auth.token;
start();
