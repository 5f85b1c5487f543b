// The portal's API reference: the vendored Swagger UI bundle renders the developer descriptor (no CDN).
"use strict";

// Swagger UI renders its servers <select> without an accessible name; name it (and any like it) once drawn.
function labelControls(root) {
  for (const select of root.querySelectorAll("select:not([aria-label]):not([aria-labelledby])")) {
    // A label wrapping the select holds the options' text too: only its own words name it.
    const named = [...(select.labels || [])].some(
      (label) => label.textContent.replace(select.textContent, "").trim() !== "");
    if (!named) {
      select.setAttribute("aria-label", select.id === "servers" ? "Server" : (select.name || "Choice"));
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("api-reference");
  if (!root || typeof window.SwaggerUIBundle !== "function") {
    return;
  }
  new MutationObserver(() => labelControls(root)).observe(root, {childList: true, subtree: true});
  window.SwaggerUIBundle({
    url: root.dataset.descriptor,
    domNode: root,
    deepLinking: false,
    validatorUrl: null,
  });
});
