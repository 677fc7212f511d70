// groupd's live dashboard: one server-sent-events stream (/events) carries the whole view as JSON
// about once a second; every message re-renders the page. Plain DOM, no build step, no CDN.
// Group, topic and client names come from clients: they are only ever set as text, never as HTML.
"use strict";

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v;
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const fmt = new Intl.NumberFormat("en-US");
const num = (n) => (n === null || n === undefined ? "–" : fmt.format(n));
const shortId = (id) => (id && id.length > 18 ? id.slice(0, 8) + "…" + id.slice(-6) : id || "");
const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });

function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

function who(m) {
  return h("span", { title: m.member_id + (m.host ? " @ " + m.host : "") }, m.client_id || shortId(m.member_id));
}

function assignmentText(assignment) {
  if (!assignment.length) return "–";
  return assignment.map(([topic, parts]) => topic + ": " + parts.join(",")).join("; ");
}

function membersTable(g) {
  if (!g.members.length) return h("p", { class: "note" }, "no members");
  return h("table", { class: "members" },
    h("thead", {}, h("tr", {}, h("th", {}, "client id"), h("th", {}, "member id"), h("th", {}, "host"), h("th", {}, "assigned partitions"))),
    h("tbody", {}, g.members.map((m) =>
      h("tr", { "data-member": m.member_id, "data-client": m.client_id },
        h("td", {}, m.client_id, m.leader ? h("span", { class: "reason" }, " (leader)") : null),
        h("td", {}, h("code", { title: m.member_id }, shortId(m.member_id))),
        h("td", {}, m.host),
        h("td", { class: "assignment" }, assignmentText(m.assignment))))));
}

function partitionsTable(g) {
  if (!g.partitions.length) return h("p", { class: "note" }, "no assigned or committed partitions");
  const clients = Object.fromEntries(g.members.map((m) => [m.member_id, m.client_id]));
  const maxLag = Math.max(1, ...g.partitions.map((p) => p.lag || 0));
  return h("div", {},
    h("table", { class: "partitions" },
      h("thead", {}, h("tr", {}, h("th", {}, "topic"), h("th", { class: "num" }, "partition"), h("th", {}, "owner"),
        h("th", { class: "num" }, "committed"), h("th", { class: "num" }, "end"), h("th", { class: "num" }, "lag"))),
      h("tbody", {}, g.partitions.map((p) =>
        h("tr", { "data-topic": p.topic, "data-partition": p.partition, "data-lag": p.lag },
          h("td", {}, p.topic), h("td", { class: "num" }, p.partition),
          h("td", {}, p.owner ? clients[p.owner] || shortId(p.owner) : "–"),
          h("td", { class: "num" }, num(p.committed)), h("td", { class: "num" }, num(p.end)),
          h("td", { class: "num" }, num(p.lag),
            p.lag ? h("span", { class: "lagbar", style: "width:" + Math.max(2, Math.round((60 * p.lag) / maxLag)) + "px" }) : null))))),
    g.partitions_omitted ? h("p", { class: "note" }, g.partitions_omitted + " more partitions not shown") : null);
}

// Partition ranges: 0,3,6,...,48 would be long; a broker's coordinator partitions are shown as a count
// with the list in the tooltip.
function partitionList(parts) {
  return parts.length ? h("span", { title: parts.join(", ") }, parts.length + " (" + (parts.length > 8 ? parts.slice(0, 8).join(",") + ",…" : parts.join(",")) + ")") : "–";
}

function brokersTable(brokers) {
  return h("table", { class: "brokers" },
    h("thead", {}, h("tr", {}, h("th", { class: "num" }, "node id"), h("th", {}, "address"), h("th", {}, "state"),
      h("th", { title: "__consumer_offsets partitions it leads: it coordinates the groups that hash to them" }, "group coordinator partitions"),
      h("th", { title: "__transaction_state partitions it leads: it coordinates those transactional ids" }, "transaction coordinator partitions"),
      h("th", { class: "num", title: "partitions of user topics it leads" }, "partition leaders"))),
    h("tbody", {}, brokers.map((b) =>
      h("tr", { "data-node": b.node_id, "data-state": b.state, "data-coordinator-partitions": b.coordinator_partitions.join(","), "data-leaders": b.leaders },
        h("td", { class: "num" }, b.node_id, b.controller ? h("span", { class: "reason" }, " (controller)") : null),
        h("td", { class: "address" }, b.address), h("td", {}, b.state),
        h("td", { class: "coordinator-partitions" }, partitionList(b.coordinator_partitions)),
        h("td", { class: "transaction-partitions" }, partitionList(b.transaction_partitions)),
        h("td", { class: "num leaders" }, num(b.leaders))))));
}

const WAITING = {
  rejoin: "has not rejoined (JoinGroup): it learns of the rebalance on its next heartbeat",
  assignment: "leader: its SyncGroup brings the assignment everyone waits for",
  sync: "has not sent SyncGroup yet",
  revoke: "revoking",
  release: "waiting for another member to release",
  heartbeat: "has not fetched the new target yet (next heartbeat)",
};

function waitingFor(g) {
  if (!g.waiting_for || !g.waiting_for.length) return null;
  return h("div", { class: "waiting" },
    h("h4", {}, "Waiting for"),
    h("ul", {}, g.waiting_for.map((w) =>
      h("li", { "data-member": w.member_id, "data-client": w.client_id, "data-waiting": w.waiting },
        who(w), " ", h("span", { class: "why" }, WAITING[w.waiting] || w.waiting),
        w.partitions ? " " + assignmentText(w.partitions) : null,
        w.target_epoch !== undefined ? h("span", { class: "reason" }, " (epoch " + w.member_epoch + " → " + w.target_epoch + ")") : null))));
}

// What the three durations are (README "Dashboard"); the report's "sync phase" is the same measure.
const PAUSED_TITLE = "first JoinGroup of the rebalance → answer to the last SyncGroup: how long consumers stopped, join phase included";
const SYNC_TITLE = "join phase end (CompletingRebalance) → the leader's assignment written: the same measure as the analyze report's \"sync phase\"";
const COORD_TITLE = "the coordinator's own duration: PreparingRebalance → Stable";

// KIP-932: per share-partition, the window between its start and end offsets by delivery state
function inFlightTable(g) {
  const rows = g.share_partitions || [];
  if (!rows.length) return h("p", { class: "note" }, "no share-partition read yet on this broker");
  const cols = ["start", "end", "acquired", "available", "acknowledged", "archived", "log_end"];
  return h("table", { class: "in-flight" },
    h("thead", {}, h("tr", {}, h("th", {}, "topic"), h("th", { class: "num" }, "partition"),
      cols.map((c) => h("th", { class: "num" }, c.replace("_", " "))))),
    h("tbody", {}, rows.map((p) =>
      h("tr", { "data-topic": p.topic, "data-partition": p.partition, "data-acquired": p.acquired, "data-available": p.available,
                "data-start": p.start, "data-end": p.end },
        h("td", {}, p.topic), h("td", { class: "num" }, p.partition),
        cols.map((c) => h("td", { class: "num " + c }, num(p[c])))))));
}

function timelineList(g) {
  if (!g.timeline.length) return h("p", { class: "note" }, "no rebalance seen since the dashboard started");
  return h("ol", { class: "timeline" }, g.timeline.map((e) => {
    const state = e.in_progress ? "in-progress" : e.outcome;
    const gen = e.generation === null ? "?" : e.generation;
    const head = [
      h("b", {}, "generation " + e.from_generation + " → " + gen),
      " ", h("span", { class: "fact" }, clock(e.started_ms)),
      e.in_progress ? h("span", { class: "reason" }, " in progress…")
        : [" ", h("span", { class: "fact", title: PAUSED_TITLE }, "paused ", h("b", { class: "paused" }, duration(e.paused_ms))),
           " ", h("span", { class: "fact", title: SYNC_TITLE }, "sync phase ", h("span", { class: "sync-phase" }, duration(e.sync_phase_ms))),
           " ", h("span", { class: "fact", title: COORD_TITLE }, "coordinator ", duration(e.coordinator_ms)),
           " ", h("span", { class: "fact" }, e.outcome === "empty" ? "→ Empty" : e.members + (e.members === 1 ? " member" : " members"))],
    ];
    const changes = [
      ...e.joined.map((m) => h("span", { class: "change joined" }, "+ ", who(m), " joined")),
      ...e.left.map((m) => h("span", { class: "change left" }, "− ", who(m), " left")),
      ...e.expired.map((m) => h("span", { class: "change expired" }, "× ", who(m), " expired (" + m.reason.replace(/_/g, " ") + ")")),
    ];
    return h("li", { class: state, "data-generation": e.generation, "data-from": e.from_generation, "data-outcome": e.outcome || "" },
      h("div", {}, head), changes.length ? h("div", {}, changes) : null,
      h("div", { class: "reason" }, e.reasons.join("; ") + (e.restarts ? " (restarted " + e.restarts + "×)" : "")));
  }));
}

function groupCard(g) {
  const share = g.type === "share";
  return h("article", { class: "group", "data-group": g.group_id, "data-type": g.type, "data-state": g.state, "data-members": g.members.length, "data-generation": g.generation, "data-coordinator": g.coordinator },
    h("div", { class: "group-head" },
      h("h3", {}, g.group_id),
      h("span", { class: "badge " + g.state }, g.state),
      g.type !== "classic" ? h("span", { class: "fact" }, g.type + " group") : null,
      h("span", { class: "fact" }, "generation ", h("b", {}, g.generation === null ? "–" : g.generation)),
      h("span", { class: "fact" }, "members ", h("b", { class: "member-count" }, g.members.length)),
      g.protocol ? h("span", { class: "fact" }, "assignor ", h("b", {}, g.protocol)) : null,
      g.coordinator !== null && g.coordinator !== undefined ? h("span", { class: "fact" }, "coordinator broker ", h("b", { class: "coordinator" }, g.coordinator)) : null,
      share ? null : h("span", { class: "fact" }, "lag ", h("b", { class: "group-lag" }, num(g.lag)))),
    waitingFor(g),
    h("div", { class: "cols" },
      h("div", {}, h("h4", {}, "Members and assignment"), membersTable(g),
        share ? [h("h4", {}, "In-flight records per share-partition"), inFlightTable(g)] : [h("h4", {}, "Partitions"), partitionsTable(g)]),
      h("div", {}, h("h4", {}, "Rebalances (newest first)"),
        h("p", { class: "note" }, "paused: first JoinGroup → last SyncGroup answer (join phase included); sync phase: join phase end → assignment written, the analyze report's \"sync phase\"; coordinator: PreparingRebalance → Stable"),
        timelineList(g))));
}

function topicBox(t) {
  const total = t.partitions.reduce((s, p) => s + (p.end || 0) - (p.start || 0), 0);
  return h("div", { class: "topic", "data-topic": t.name },
    h("b", {}, t.name), h("span", { class: "fact" }, " " + t.partitions.length + " partitions, " + num(total) + " records"),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", { class: "num" }, "partition"), h("th", { class: "num" }, "start"), h("th", { class: "num" }, "end"))),
      h("tbody", {}, t.partitions.map((p) => h("tr", { "data-leader": p.leader }, h("td", { class: "num" }, p.partition, p.leader !== null && p.leader !== undefined ? h("span", { class: "reason", title: "leader" }, " @" + p.leader) : null), h("td", { class: "num" }, num(p.start)), h("td", { class: "num" }, num(p.end)))))));
}

function render(view) {
  const brokers = document.getElementById("brokers");
  brokers.hidden = !view.brokers;
  if (view.brokers) document.getElementById("broker-list").replaceChildren(brokersTable(view.brokers));
  const groups = document.getElementById("groups");
  groups.replaceChildren(...(view.groups.length ? view.groups.map(groupCard) : [h("p", { class: "empty" }, "no groups yet")]));
  if (view.groups_total > view.groups.length) {
    groups.append(h("p", { class: "note" }, (view.groups_total - view.groups.length) + " more groups not shown (rebalancing and lagging groups come first)"));
  }
  const topics = document.getElementById("topics");
  topics.replaceChildren(...(view.topics.length ? view.topics.map(topicBox) : [h("p", { class: "empty" }, "no topics yet")]));
  if (view.topics_total > view.topics.length) topics.append(h("p", { class: "note" }, (view.topics_total - view.topics.length) + " more topics not shown"));
  document.getElementById("summary").textContent =
    view.groups_total + " groups, " + view.topics_total + " topics · updated " + clock(view.now_ms);
}

function setStatus(kind, label) {
  const el = document.getElementById("status");
  el.className = "status " + kind;
  el.dataset.status = kind;
  el.textContent = label;
}

function connect() {
  const source = new EventSource("events");
  source.onopen = () => setStatus("live", "live");
  source.onerror = () => setStatus("down", "disconnected, retrying…");
  source.onmessage = (msg) => {
    setStatus("live", "live");
    render(JSON.parse(msg.data));
  };
}

connect();
