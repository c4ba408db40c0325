// Progressive enhancement only: every page works without this file.
// Buttons with data-confirm ask before their form is submitted.
document.addEventListener("submit", function (e) {
  var b = e.submitter;
  if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) e.preventDefault();
});

// A time zone picker left at the default offers the browser's own zone;
// the note says so, and nothing is saved until the recipient saves.
(function () {
  var s = document.querySelector("select[data-guess-zone]");
  var zone = window.Intl && Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!s || !zone || s.value === zone) return;
  for (var i = 0; i < s.options.length; i++) {
    if (s.options[i].value === zone) {
      s.value = zone;
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
