// /play: after htmx swaps a tool's answer (and, out of band, each field's error message), mark the inputs
// whose message is not empty as invalid, so assistive technology announces which field is wrong.
document.addEventListener("htmx:after:swap", () => {
  for (const msg of document.querySelectorAll(".tool .field-error")) {
    const input = document.getElementById(msg.id.replace(/^err-/, ""));
    if (!input) continue;
    if (msg.textContent.trim()) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
});
