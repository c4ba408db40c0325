// Progressive enhancement only: every page works without this file.
// Buttons with data-confirm ask before their form is submitted.
document.addEventListener("submit", function (e) {
  var b = e.submitter;
  if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) e.preventDefault();
});

// The settings page describes digests in the chosen zone; the times are
// local, so a new zone changes only the name in "(Europe/Berlin)".
(function () {
  var s = document.querySelector("select[name=timezone]");
  if (!s) return;
  var shown = s.value;
  function describe() {
    var lines = document.querySelectorAll(".preview");
    for (var i = 0; i < lines.length; i++) {
      lines[i].textContent = lines[i].textContent.split("(" + shown + ")").join("(" + s.value + ")");
    }
    shown = s.value;
  }
  s.addEventListener("change", describe);
  // A picker left at the default offers the browser's own zone; the note
  // says so, and nothing is saved until the recipient saves.
  var zone = window.Intl && Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!s.hasAttribute("data-guess-zone") || !zone || s.value === zone) return;
  for (var i = 0; i < s.options.length; i++) {
    if (s.options[i].value === zone) {
      s.value = zone;
      describe();
      var note = document.getElementById("f-timezone-guess");
      if (note) note.hidden = false;
      return;
    }
  }
})();

// The error summary takes the focus; autofocus does this without
// JavaScript, this covers browsers that skip autofocus on a non-field.
(function () {
  var e = document.getElementById("error-summary");
  if (e && document.activeElement !== e) e.focus();
})();
