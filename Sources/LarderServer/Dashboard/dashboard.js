// The dashboard's script: refreshes <main id="live"> from a fetch of the
// same URL every 5 s (the document and its scroll position stay), and
// deletes a store when its button is clicked, or every store of a label
// prefix (one CI run's) after a confirmation. A refresh does not start
// while a delete is under way, and one that started before a delete is
// thrown away. Served inline; the Content-Security-Policy admits it by hash.
"use strict";
(() => {
  let deleting = 0, deletes = 0, refreshing = false;
  const status = document.getElementById("status");
  const say = (text) => { status.textContent = text; };
  async function refresh() {
    if (deleting > 0 || refreshing || document.hidden) return;
    refreshing = true;
    const started = deletes;
    try {
      const answer = await fetch(location.href, {cache: "no-store", headers: {"Accept": "text/html"}});
      if (answer.status === 401) { location.reload(); return; }
      if (!answer.ok) { say("Refresh failed: HTTP " + answer.status); return; }
      const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").getElementById("live");
      const current = document.getElementById("live");
      if (!fresh || !current || deleting > 0 || deletes !== started) return;
      current.replaceWith(document.importNode(fresh, true));
      if (status.textContent.startsWith("Refresh failed")) say("");
    } catch (error) {
      say("Refresh failed: " + error.message);
    } finally {
      refreshing = false;
    }
  }
  document.addEventListener("click", async (event) => {
    const all = event.target.closest("button[data-delete-prefix]");
    if (all) {
      const prefix = all.dataset.deletePrefix;
      if (!confirm("Delete the " + all.dataset.count + " stores whose label starts with \u201c" + prefix + "\u201d, kept ones too?")) return;
      deleting++;
      deletes++;
      all.disabled = true;
      try {
        const answer = await fetch("/stores?label_prefix=" + encodeURIComponent(prefix), {method: "DELETE"});
        if (answer.ok) {
          say("Deleted " + (await answer.json()).deleted + " stores labelled " + prefix + "\u2026");
        } else {
          let why = "HTTP " + answer.status;
          try { why = (await answer.json()).error.message; } catch (ignored) {}
          say("Could not delete them: " + why);
          all.disabled = false;
        }
      } catch (error) {
        say("Could not delete them: " + error.message);
        all.disabled = false;
      } finally {
        deleting--;
      }
      refresh();
      return;
    }
    const button = event.target.closest("button[data-delete]");
    if (!button) return;
    const id = button.dataset.delete;
    deleting++;
    deletes++;
    button.disabled = true;
    try {
      const answer = await fetch("/stores/" + encodeURIComponent(id), {method: "DELETE"});
      if (answer.status === 204 || answer.status === 404) {
        button.closest("tr").remove();
        say("Deleted " + id + ".");
      } else {
        let why = "HTTP " + answer.status;
        try { why = (await answer.json()).error.message; } catch (ignored) {}
        say("Could not delete " + id + ": " + why);
        button.disabled = false;
      }
    } catch (error) {
      say("Could not delete " + id + ": " + error.message);
      button.disabled = false;
    } finally {
      deleting--;
    }
    refresh();
  });
  setInterval(refresh, 5000);
})();
