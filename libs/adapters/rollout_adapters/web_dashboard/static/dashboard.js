// The dashboard's only script: live updates and the paged cluster filter. No library, no build step.
// Polls /api/status with the last ETag (304 while nothing changed); on a change it swaps in the
// server-rendered /fragments/live and reloads the current page of /api/clusters. Cluster rows are
// built with textContent, so a name is always text, never markup.

const POLL_MS = 2000;
const LIMIT = 50;
const COLUMNS = ["kind", "status", "stage", "partition", "labels", "detail"];

const main = document.getElementById("main");
const live = document.getElementById("live");
const liveState = document.getElementById("live-state");
const form = document.getElementById("cluster-filter");
const rowsBody = document.getElementById("cluster-rows");
const count = document.getElementById("cluster-count");
const prev = document.getElementById("prev-page");
const next = document.getElementById("next-page");

let etag = main.dataset.etag || "";
let offset = 0;
let matched = 0;
let debounce = 0;

function filterParams() {
  const params = new URLSearchParams();
  for (const [key, value] of new FormData(form)) {
    if (String(value).trim() !== "") params.set(key, String(value).trim());
  }
  params.set("offset", String(offset));
  params.set("limit", String(LIMIT));
  return params;
}

function cell(tag, text) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (tag === "th") element.scope = "row";
  return element;
}

function labelsText(labels) {
  return Object.keys(labels).sort().map((key) => `${key}=${labels[key]}`).join(", ");
}

function showClusters(page) {
  const rows = page.clusters.map((cluster) => {
    const row = document.createElement("tr");
    row.append(cell("th", cluster.name));
    for (const column of COLUMNS) {
      const value = column === "labels" ? labelsText(cluster.labels) : cluster[column] ?? "-";
      row.append(cell("td", String(value)));
    }
    return row;
  });
  rowsBody.replaceChildren(...rows);
  matched = page.matched;
  const first = page.clusters.length ? page.offset + 1 : 0;
  count.textContent = `${first}-${page.offset + page.clusters.length} of ${page.matched} matching (${page.total} need attention)`;
  prev.disabled = page.offset === 0;
  next.disabled = page.offset + page.clusters.length >= page.matched;
}

async function loadClusters() {
  const response = await fetch(`/api/clusters?${filterParams()}`, { cache: "no-store" });
  if (response.ok) showClusters(await response.json());
}

async function poll() {
  try {
    const response = await fetch("/api/status", { cache: "no-store", headers: etag ? { "If-None-Match": etag } : {} });
    if (response.status === 200) {
      const doc = await response.json();
      etag = response.headers.get("ETag") || "";
      const fragment = await fetch("/fragments/live", { cache: "no-store" });
      if (fragment.ok) live.innerHTML = await fragment.text(); // server-rendered, every value escaped there
      main.dataset.etag = etag;
      main.dataset.batch = String(doc.batch ?? "");
      await loadClusters();
      liveState.textContent = `live: batch ${doc.batch ?? "-"}`;
    } else if (response.status !== 304) {
      liveState.textContent = `the server answered ${response.status}; retrying`;
    }
  } catch {
    liveState.textContent = "the server cannot be reached; retrying";
  }
  setTimeout(poll, POLL_MS);
}

form.addEventListener("input", () => {
  clearTimeout(debounce);
  debounce = setTimeout(() => {
    offset = 0;
    loadClusters();
  }, 200);
});
form.addEventListener("submit", (event) => event.preventDefault());
prev.addEventListener("click", () => {
  offset = Math.max(0, offset - LIMIT);
  loadClusters();
});
next.addEventListener("click", () => {
  if (offset + LIMIT < matched) offset += LIMIT;
  loadClusters();
});

main.dataset.ready = "1";
loadClusters();
setTimeout(poll, POLL_MS);
