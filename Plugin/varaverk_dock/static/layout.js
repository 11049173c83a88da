// Varaverk dock: the page's frame. The sidebar collapses on a wide screen and is a drawer on a
// narrow one (the width where dock.css switches, NARROW); the page-wide keyboard shortcuts
// listed in the sidebar ("Keyboard shortcuts") live here, except those of the question box.
// A wide screen's choice is remembered in this browser (localStorage, COLLAPSED_KEY).
"use strict";

(function () {
  const NARROW = window.matchMedia("(max-width: 760px)");
  const layout = document.getElementById("layout");
  const toggle = document.getElementById("sidebar-toggle");

  const COLLAPSED_KEY = "varaverk.sidebarCollapsed";
  const narrow = () => NARROW.matches;

  function remember(collapsed) {
    try { localStorage.setItem(COLLAPSED_KEY, collapsed ? "1" : ""); } catch (e) { /* private */ }
  }

  function remembered() {
    try { return localStorage.getItem(COLLAPSED_KEY) === "1"; } catch (e) { return false; }
  }

  function sidebarShown() {
    return narrow() ? layout.classList.contains("drawer-open")
                    : !layout.classList.contains("sidebar-collapsed");
  }

  function setSidebar(show) {
    if (narrow()) layout.classList.toggle("drawer-open", show);
    else { layout.classList.toggle("sidebar-collapsed", !show); remember(!show); }
    toggle.setAttribute("aria-expanded", String(sidebarShown()));
  }

  function closeDrawer() { if (narrow()) setSidebar(false); }

  toggle.addEventListener("click", () => setSidebar(!sidebarShown()));
  document.getElementById("drawer-backdrop").addEventListener("click", closeDrawer);
  // Picking a conversation (or a new one) on a phone is done with the drawer.
  document.getElementById("sidebar").addEventListener("click", (e) => {
    if (e.target.closest(".chat-open, #new-chat")) closeDrawer();
  });
  NARROW.addEventListener("change", () => {
    layout.classList.remove("drawer-open");
    toggle.setAttribute("aria-expanded", String(sidebarShown()));
  });
  layout.classList.toggle("sidebar-collapsed", remembered());
  toggle.setAttribute("aria-expanded", String(sidebarShown()));

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", (e) => {
    if (e.altKey && !e.ctrlKey && !e.metaKey && e.code === "KeyS") {
      e.preventDefault();
      setSidebar(!sidebarShown());
    } else if (e.key === "Escape" && narrow() && sidebarShown()) {
      setSidebar(false);
    } else if (e.key === "/" && !typing(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      document.getElementById("question").focus();
    }
  });
})();
