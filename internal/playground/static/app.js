// The HyperOps playground page: it shows what the fake Slack holds, as the chosen persona sees it, and sends what
// the persona does (commands, messages, clicks, modal submissions) to the playground, which delivers them to the
// bot through Socket Mode the way Slack would. The HTML of messages comes rendered (and escaped) from the server.
"use strict";

const st = {
  as: localStorage.getItem("hp-as") || "engineer",
  channel: localStorage.getItem("hp-channel") || "C0MLOPS",
  thread: null,
  data: null,
  dismissed: new Set(),
  loading: false,
  again: false,
};

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function time(ts) {
  const d = new Date(parseFloat(ts) * 1000);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function initials(name) {
  return esc((name || "?").split(/[\s-]+/).map((w) => w[0]).join("").slice(0, 2).toUpperCase());
}

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  let a = {};
  try { a = await res.json(); } catch (e) { a = { error: res.statusText }; }
  if (!a.ok && a.error) toast(a.error);
  return a;
}

let toastTimer;
function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 6000);
}

async function load() {
  if (st.loading) { st.again = true; return; }
  st.loading = true;
  try {
    const res = await fetch("/api/state?as=" + encodeURIComponent(st.as));
    if (res.ok) {
      st.data = await res.json();
      render();
    }
  } finally {
    st.loading = false;
    if (st.again) { st.again = false; load(); }
  }
}

function conv() {
  const d = st.data;
  let c = d.channels.find((x) => x.id === st.channel);
  if (!c) { c = d.channels[0]; st.channel = c.id; }
  return c;
}

function render() {
  const d = st.data;
  document.body.dataset.as = st.as;
  document.body.classList.toggle("thread-open", !!st.thread);
  $("throwaway").title = "fake Slack " + d.fakes.slack + " · fake AWS " + d.fakes.aws;
  renderPersonas(d);
  if (st.channel === HOME && d.as.isAgent) st.channel = d.as.dm;
  renderSidebar(d);
  document.body.classList.toggle("home-open", st.channel === HOME);
  if (st.channel === HOME) {
    st.thread = null;
    setHTML($("channel-head"), "🏠 Home<small>HyperOps's App Home tab: what waits for you, yours, what runs</small>");
    renderHome(d);
    renderThread({ messages: [] });
    renderWorld(d.world);
    renderModal(d);
    return;
  }
  const c = conv();
  setHTML($("channel-head"), (c.dm ? "💬 HyperOps" : "# " + esc(c.name)) + "<small>" + esc(c.topic) + "</small>");
  renderGuide(d);
  renderMessages(c);
  renderThread(c);
  renderWorld(d.world);
  renderModal(d);
  const agent = d.as.isAgent;
  $("seed-btn").hidden = !(agent && c.dm);
  $("composer-hint").textContent = c.dm
    ? (agent ? "A JSON request (the agent contract); Enter sends" : "Read-only commands here, e.g. /hp status")
    : "Slash commands: " + d.command + " help · Enter sends, Shift+Enter is a new line";
}

// HOME is the sidebar's App Home entry; opening it sends app_home_opened, and the bot publishes the tab.
const HOME = "HOME";

function renderHome(d) {
  const h = d.home;
  keepScroll($("messages"), h
    ? `<div class="msg home" data-home="1" data-ts="home"><div class="msg-body home-body">${h.html}</div></div>`
    : `<div class="empty">Opening Home…</div>`);
}

async function openHome() {
  await post("/api/home", { as: st.as });
}

function renderPersonas(d) {
  const sel = $("persona");
  if (sel.options.length !== d.personas.length) {
    sel.innerHTML = d.personas.map((p) => `<option value="${esc(p.key)}">${esc(p.realName)} — ${esc(p.role)}</option>`).join("");
  }
  sel.value = st.as;
}

function renderSidebar(d) {
  const count = (c) => c.messages.filter((m) => !m.threadTs).length;
  const row = (c, label) => `<button type="button" class="conv${c.id === st.channel ? " active" : ""}" data-conv="${esc(c.id)}">${label}<span class="count">${count(c) || ""}</span></button>`;
  const shared = d.channels.filter((c) => !c.dm);
  const dm = d.channels.find((c) => c.dm);
  setHTML($("sidebar"),
    `<div class="who">${esc(d.as.realName)}<small>${esc(d.as.role)}</small></div>` +
    (d.as.isAgent ? "" : "<h3>Channels</h3>" + shared.map((c) => row(c, "# " + esc(c.name))).join("")) +
    (d.as.isAgent ? "" : `<h3>Apps</h3><button type="button" class="conv${st.channel === HOME ? " active" : ""}" data-conv="${HOME}">🏠 HyperOps Home</button>`) +
    "<h3>Direct messages</h3>" + row(dm, "💬 HyperOps (app)"));
}

function renderGuide(d) {
  const g = $("guide");
  if (g.dataset.ready) return;
  g.dataset.ready = "1";
  g.innerHTML = `<div class="guide-title">Start here — each step fills the composer; press Enter to send. <button type="button" class="link-btn" id="guide-toggle">${document.body.classList.contains("guide-hidden") ? "show steps" : "hide steps"}</button></div>` +
    d.steps.map((s, i) => `<button type="button" class="step" data-step="${i}"><b>${esc(s.title)}</b><span>${esc(s.hint)}</span></button>`).join("") +
    `<button type="button" class="step" data-step="agent"><b>4. As the agent: a JSON request</b><span>The README's example request with dryRun: the reply carries the machine-readable plan.</span></button>`;
}

function messageHTML(m, channel, inThread) {
  const who = m.bot ? "bot" : (m.user === "U0AGENT" ? "agent" : "");
  let h = `<div class="msg${m.ephemeral ? " ephemeral" : ""}" data-channel="${esc(channel)}" data-ts="${esc(m.ts)}">` +
    `<div class="avatar ${who}">${m.bot ? "H" : initials(m.name)}</div><div class="msg-body">` +
    `<div class="msg-meta"><b>${esc(m.name)}</b>${m.bot ? '<span class="app-tag">APP</span>' : ""}<time>${time(m.ts)}</time>` +
    (m.edited ? '<span class="edited">(edited)</span>' : "") + "</div>" +
    (m.ephemeral ? '<div class="only-you">👁 Only visible to you</div>' : "") +
    `<div class="msg-content">${m.html}</div>`;
  if (m.files && m.files.length) {
    h += '<div class="files">' + m.files.map((f) => f.image
      ? `<a href="${esc(f.url)}" target="_blank"><img src="${esc(f.url)}" alt="${esc(f.name)}"></a>`
      : `<a href="${esc(f.url)}" target="_blank">📄 ${esc(f.name)}</a>`).join("") + "</div>";
  }
  if (m.metadataType) {
    h += `<details class="metadata"><summary>message metadata: ${esc(m.metadataType)}</summary><pre>${esc(m.metadata)}</pre></details>`;
  }
  if (!inThread && m.replies) {
    h += `<button type="button" class="replies-link" data-thread="${esc(m.ts)}">${m.replies} ${m.replies === 1 ? "reply" : "replies"}</button>`;
  }
  return h + "</div></div>";
}

// setHTML replaces an element's content only when it changed, so a redraw leaves what a person points at alone.
function setHTML(el, html) {
  if (el.dataset.drawn === "1" && el._html === html) return false;
  el._html = html;
  el.dataset.drawn = "1";
  el.innerHTML = html;
  return true;
}

function keepScroll(el, html) {
  const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  if (!setHTML(el, html)) return;
  if (atBottom) el.scrollTop = el.scrollHeight;
}

function renderMessages(c) {
  const top = c.messages.filter((m) => !m.threadTs);
  keepScroll($("messages"), top.length ? top.map((m) => messageHTML(m, c.id, false)).join("")
    : `<div class="empty">Nothing here yet.</div>`);
}

function renderThread(c) {
  const pane = $("thread");
  if (!st.thread) { pane.hidden = true; return; }
  const msgs = c.messages.filter((m) => m.ts === st.thread || m.threadTs === st.thread);
  if (!msgs.length) { st.thread = null; pane.hidden = true; return; }
  pane.hidden = false;
  keepScroll($("thread-messages"), msgs.map((m) => messageHTML(m, c.id, true)).join(""));
}

function renderWorld(w) {
  if (!w || !w.mode) { $("world").innerHTML = "<h2>Simulated world</h2><p class='mode'>reading…</p>"; return; }
  const groups = (w.groups || []).map((g) => `<tr><td><b>${esc(g.name)}</b><br>${esc(g.type)}</td><td>${g.current} / ${g.target}</td><td>${esc(g.status)}</td></tr>`).join("");
  const nodes = (w.nodes || []).map((n) => {
    const healthy = !n.cordoned && (!n.health || n.health === "Schedulable");
    return `<tr data-node="${esc(n.name)}"><td>${esc(n.name)}<br><small>${esc(n.group || "")} ${esc(n.type || "")}</small></td>` +
      `<td>${n.gpusUsed}/${n.gpus}</td><td>${n.ready ? "Ready" : '<span class="bad">NotReady</span>'}` +
      (healthy ? "" : `<br><span class="bad">${esc(n.health || "cordoned")}</span>`) +
      `<br><button type="button" class="bk-btn mini" data-world="${healthy ? "node-unhealthy" : "node-healthy"}" data-name="${esc(n.name)}">${healthy ? "make unhealthy" : "make healthy"}</button></td></tr>`;
  }).join("");
  const loads = (w.workloads || []).map((j) => `<tr data-workload="${esc(j.name)}"><td>${esc(j.name)}<br><small>${esc(j.namespace)} · ${esc(j.kind)}</small></td>` +
    `<td><span class="state state-${esc(j.state)}">${esc(j.state)}</span><br><small>${esc(j.pods)}</small>` +
    (j.state === "running" || j.state === "pending" ? `<br><button type="button" class="bk-btn bk-danger mini" data-world="fail-workload" data-name="${esc(j.name)}" data-ns="${esc(j.namespace)}">make it fail</button>` : "") +
    "</td></tr>").join("");
  setHTML($("world"), `<h2>Simulated world</h2><div class="mode">Kubernetes: ${esc(w.mode)}</div>` +
    `<h3>HyperPod ${esc(w.hyperpod)} (fake AWS) <span class="mode">${esc(w.hyperpodStatus)}</span></h3>` +
    `<table id="groups"><tr><th>instance group</th><th>nodes</th><th>status</th></tr>${groups}</table>` +
    `<p>${w.throttled ? '<span class="throttle-on">AWS is throttling every call</span> ' : ""}` +
    `<button type="button" class="bk-btn mini" data-world="${w.throttled ? "throttle-off" : "throttle-on"}">${w.throttled ? "stop throttling" : "make AWS throttle"}</button></p>` +
    `<h3>Nodes · GPUs ${w.gpus.Used}/${w.gpus.Total} in use</h3><table id="nodes"><tr><th>node</th><th>GPUs</th><th>state</th></tr>${nodes}</table>` +
    `<h3>Workloads</h3>` + (loads ? `<table id="workloads"><tr><th>job</th><th>state</th></tr>${loads}</table>` : '<div class="mode">none yet</div>') +
    ((w.problems || []).length ? `<p class="bad">${w.problems.map(esc).join("<br>")}</p>` : ""));
}

function renderModal(d) {
  const open = (d.modals || []).filter((m) => !st.dismissed.has(m.id));
  const ov = $("overlay");
  if (ov.dataset.kind === "confirm") return;
  if (!open.length) { if (ov.dataset.kind === "modal") { ov.hidden = true; ov.dataset.kind = ""; } return; }
  const m = open[open.length - 1];
  if (ov.dataset.view === m.id && !ov.hidden) return;
  ov.dataset.kind = "modal";
  ov.dataset.view = m.id;
  ov.innerHTML = `<div class="dialog" role="dialog" aria-label="${esc(m.title)}"><div class="dialog-head">${esc(m.title)}</div>` +
    `<div class="dialog-body">${m.html}</div><div class="dialog-foot">` +
    `<button type="button" class="bk-btn" data-modal="close">${esc(m.close)}</button>` +
    `<button type="button" class="bk-btn bk-primary" data-modal="submit">${esc(m.submit)}</button></div></div>`;
  ov.hidden = false;
}

function confirmDialog(c) {
  return new Promise((resolve) => {
    const ov = $("overlay");
    ov.dataset.kind = "confirm";
    ov.innerHTML = `<div class="dialog" role="alertdialog"><div class="dialog-head">${esc(c.title || "Are you sure?")}</div>` +
      `<div class="dialog-body">${esc(c.text)}</div><div class="dialog-foot">` +
      `<button type="button" class="bk-btn" data-confirm-answer="no">${esc(c.deny || "Cancel")}</button>` +
      `<button type="button" class="bk-btn ${c.style === "danger" ? "bk-danger" : "bk-primary"}" data-confirm-answer="yes">${esc(c.confirm || "Yes")}</button></div></div>`;
    ov.hidden = false;
    ov.onclick = (e) => {
      const b = e.target.closest("[data-confirm-answer]");
      if (!b) return;
      ov.onclick = null;
      ov.hidden = true;
      ov.dataset.kind = "";
      resolve(b.dataset.confirmAnswer === "yes");
      load().then(() => { if (st.channel === HOME) openHome(); });
    };
  });
}

async function send(text, threadTs) {
  const a = await post("/api/send", { as: st.as, channel: st.channel, text, threadTs: threadTs || "" });
  return a.ok;
}

async function onAction(el) {
  const msg = el.closest(".msg");
  if (!msg) return;
  if (el.dataset.confirm) {
    let c = {};
    try { c = JSON.parse(el.dataset.confirm); } catch (e) { /* shown with defaults */ }
    if (!(await confirmDialog(c))) return;
  }
  el.disabled = true;
  const body = { as: st.as, channel: msg.dataset.channel, ts: msg.dataset.ts, action: el.dataset.action, block: el.dataset.block };
  if (msg.dataset.home) {
    await post("/api/homeclick", { as: st.as, action: el.dataset.action, block: el.dataset.block });
  } else if (el.dataset.kind === "overflow") {
    body.value = el.dataset.value;
    await post("/api/overflow", body);
  } else {
    await post("/api/click", body);
  }
  el.disabled = false;
}

async function submitModal() {
  const ov = $("overlay");
  const values = {};
  ov.querySelectorAll("[data-block][data-action]").forEach((i) => {
    (values[i.dataset.block] = values[i.dataset.block] || {})[i.dataset.action] = i.value;
  });
  const a = await post("/api/view", { as: st.as, viewId: ov.dataset.view, values });
  ov.querySelectorAll("[data-error-for]").forEach((e) => { e.textContent = (a.errors || {})[e.dataset.errorFor] || ""; });
  if (a.ok) { ov.hidden = true; ov.dataset.kind = ""; ov.dataset.view = ""; }
}

document.addEventListener("click", async (e) => {
  const t = e.target;
  const convBtn = t.closest("[data-conv]");
  if (convBtn) {
    st.channel = convBtn.dataset.conv; st.thread = null; localStorage.setItem("hp-channel", st.channel); render();
    if (st.channel === HOME) openHome();
    return;
  }
  const thr = t.closest("[data-thread]");
  if (thr) { st.thread = thr.dataset.thread; render(); return; }
  const toggle = t.closest("[data-kind=overflow-toggle]");
  document.querySelectorAll(".bk-menu").forEach((m) => { if (!toggle || m !== toggle.nextElementSibling) m.hidden = true; });
  if (toggle) { toggle.nextElementSibling.hidden = !toggle.nextElementSibling.hidden; return; }
  const act = t.closest("[data-kind=button], [data-kind=overflow]");
  if (act) { onAction(act); return; }
  const step = t.closest("[data-step]");
  if (step) { useStep(step.dataset.step); return; }
  const w = t.closest("[data-world]");
  if (w) { w.disabled = true; await post("/api/world", { kind: w.dataset.world, name: w.dataset.name || "", namespace: w.dataset.ns || "" }); return; }
  const md = t.closest("[data-modal]");
  if (md) {
    if (md.dataset.modal === "submit") { submitModal(); return; }
    st.dismissed.add($("overlay").dataset.view);
    $("overlay").hidden = true;
    $("overlay").dataset.kind = "";
  }
});

function setPersona(key) {
  st.as = key;
  localStorage.setItem("hp-as", key);
  const p = st.data && st.data.personas.find((x) => x.key === key);
  if (p && p.isAgent && st.channel === HOME) st.channel = p.dm;
  if (p && st.channel !== HOME && (p.isAgent || (st.data && st.data.channels.find((c) => c.id === st.channel && c.dm)))) st.channel = p.dm;
  localStorage.setItem("hp-channel", st.channel);
  st.thread = null;
  const ov = $("overlay");
  ov.hidden = true; ov.dataset.kind = ""; ov.dataset.view = "";
}

function useStep(i) {
  const d = st.data;
  const box = $("composer-text");
  if (i === "agent") {
    setPersona("agent");
    box.value = d.agentSeed;
  } else {
    const s = d.steps[+i];
    setPersona(s.as);
    st.channel = s.channel;
    box.value = s.text;
  }
  load().then(() => box.focus());
}

$("persona").addEventListener("change", (e) => {
  setPersona(e.target.value);
  load().then(() => { if (st.channel === HOME) openHome(); });
  if (st.channel === HOME) openHome();
});
document.body.classList.toggle("guide-hidden", localStorage.getItem("hp-guide") === "hidden");
document.addEventListener("click", (e) => {
  if (e.target.id !== "guide-toggle") return;
  const hidden = !document.body.classList.contains("guide-hidden");
  document.body.classList.toggle("guide-hidden", hidden);
  localStorage.setItem("hp-guide", hidden ? "hidden" : "shown");
  e.target.textContent = hidden ? "show steps" : "hide steps";
});
$("thread-close").addEventListener("click", () => { st.thread = null; render(); });
$("seed-btn").addEventListener("click", () => { $("composer-text").value = st.data.agentSeed; $("composer-text").focus(); });

function composer(form, box, thread) {
  const go = async (e) => {
    e.preventDefault();
    const text = box.value;
    if (!text.trim()) return;
    if (await send(text, thread ? st.thread : "")) box.value = "";
  };
  form.addEventListener("submit", go);
  box.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) go(e); });
}
composer($("composer"), $("composer-text"), false);
composer($("thread-composer"), $("thread-text"), true);

const events = new EventSource("/api/events");
events.addEventListener("change", () => load());
load().then(() => { if (st.channel === HOME) openHome(); });
