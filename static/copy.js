// "Copy link" beside a reset link (templates/account/reset_links.html): a button with data-copy="ID" copies the
// text of the element with that id and says so in its own label for a moment; without JavaScript the link stays
// selectable text, and the button is not shown.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    var label = button.textContent;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent.trim()).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = label; }, 2000);
      }, function () {
        button.textContent = "Copy failed: select the link";
      });
    });
  });
})();
