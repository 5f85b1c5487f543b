// Progressive enhancement only: every page works without this file.
// - <time data-countdown> elements count down to their datetime every second.
// - A region with data-live-url is refreshed when the state its data-state-url reports changes (new
//   oversight requests appear without reloading); its aria-live attribute announces the change.
"use strict";

function describe(seconds) {
  const past = seconds < 0;
  let s = Math.abs(Math.round(seconds));
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  const text = (h ? h + " h " : "") + (h || m ? m + " min " : "") + s + " s";
  return past ? "overdue by " + text : "due in " + text;
}

function tick() {
  for (const el of document.querySelectorAll("time[data-countdown]")) {
    const seconds = (Date.parse(el.getAttribute("datetime")) - Date.now()) / 1000;
    el.textContent = describe(seconds);
    el.classList.toggle("overdue", seconds < 0);
  }
}

async function refresh(region) {
  // Never replace what someone is typing or about to press: try again on the next round.
  if (region.contains(document.activeElement)) return;
  const stateUrl = region.dataset.stateUrl;
  try {
    const state = await fetch(stateUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!state.ok) return;
    const text = await state.text();
    if (text === region.dataset.state) return;
    const html = await fetch(region.dataset.liveUrl, { credentials: "same-origin" });
    if (!html.ok) return;
    const doc = new DOMParser().parseFromString(await html.text(), "text/html");
    const fresh = doc.getElementById(region.id);
    if (fresh) {
      region.innerHTML = fresh.innerHTML;
      region.dataset.state = text;
      tick();
    }
  } catch (e) {
    // Offline or signed out: the next tick tries again; the page itself still works.
  }
}

document.addEventListener("DOMContentLoaded", () => {
  tick();
  setInterval(tick, 1000);
  for (const region of document.querySelectorAll("[data-live-url]")) {
    const every = Number(region.dataset.every || "5000");
    setInterval(() => refresh(region), every);
  }
});
