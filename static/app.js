// Progressive enhancement only: every page works without this file.
// Buttons with data-confirm ask before their form is submitted.
document.addEventListener("submit", function (e) {
  var b = e.submitter;
  if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) e.preventDefault();
});
