/* Whether the studio server still answers: a small fetch of /health every few seconds. When it stops answering, a
 * banner over every tab says so within seconds (a dead server leaves Gradio's calls waiting forever, and a run at
 * "running · 0 %"); when it answers again the banner goes and listeners hear "back".
 *
 * window.MetagenConnection -> { isLost(), onChange(fn("lost" | "back")), LOST_TEXT }
 */
(function () {
  "use strict";
  if (window.MetagenConnection) return;

  const PING_MS = 2000;        // while connected
  const RETRY_MS = 1000;       // while lost: the first retries come soon, so a restart is seen quickly,
  const RETRY_MAX_MS = 8000;   // then back off (doubling) up to this: a server down for long is not asked 1/s
  const TIMEOUT_MS = 2500;     // a ping unanswered this long counts as failed
  const FAILS_TO_LOSE = 2;     // one slow answer is not a lost server
  const LOST_TEXT = "Lost the connection to the studio server; reconnecting…";

  let fails = 0;
  let lost = false;
  let retryMs = RETRY_MS;
  const listeners = [];

  function healthUrl() {
    return new URL("health", document.baseURI).toString();  // relative: a proxy prefix keeps working
  }

  function banner() {
    let el = document.getElementById("mg-connection-banner");
    if (!el && document.body) {
      el = document.createElement("div");
      el.id = "mg-connection-banner";
      el.className = "mg-connection-banner";
      el.setAttribute("role", "alert");
      el.setAttribute("data-testid", "connection-lost");
      el.hidden = true;
      el.textContent = LOST_TEXT;
      document.body.appendChild(el);
    }
    return el;
  }

  function setLost(value) {
    if (value === lost) return;
    lost = value;
    const el = banner();
    if (el) el.hidden = !lost;
    listeners.forEach((fn) => { try { fn(lost ? "lost" : "back"); } catch (e) { console.error(e); } });
  }

  async function ping() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
    let answered = false;
    try {
      await fetch(healthUrl(), { cache: "no-store", signal: abort.signal, credentials: "same-origin" });
      answered = true;  // any HTTP answer means the server runs
    } catch (e) {
      answered = false;
    } finally {
      clearTimeout(timer);
    }
    if (answered) {
      fails = 0;
      retryMs = RETRY_MS;
      setLost(false);
    } else if (++fails >= FAILS_TO_LOSE) {
      setLost(true);
    }
    if (lost) {
      setTimeout(ping, retryMs);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
    } else {
      setTimeout(ping, PING_MS);
    }
  }

  window.MetagenConnection = {
    isLost: () => lost,
    onChange: (fn) => { listeners.push(fn); },
    LOST_TEXT: LOST_TEXT,
  };
  setTimeout(ping, PING_MS);
})();
