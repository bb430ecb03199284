// The viewer's only script: hide or show thoughts on a timeline, remembered per browser.
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("show-thoughts");
  if (!box) return;
  const apply = () => document.body.classList.toggle("hide-thoughts", !box.checked);
  box.checked = localStorage.getItem("airsspec-thoughts") !== "hidden";
  box.addEventListener("change", () => {
    localStorage.setItem("airsspec-thoughts", box.checked ? "shown" : "hidden");
    apply();
  });
  apply();
});
