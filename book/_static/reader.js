// The book's pages as a reader meets them (book/conf.py loads this on every page): a display formula
// wider than the column is scaled down to fit it, after MathJax has typeset it and whenever the window
// changes size, so a phone shows the whole formula rather than a slice of it.
(function () {
  function fitFormulas() {
    document.querySelectorAll('article mjx-container[display="true"]').forEach(function (box) {
      box.style.fontSize = "";
      var wide = box.scrollWidth, room = box.clientWidth;
      if (wide > room + 1 && room > 0) {
        box.style.fontSize = Math.max(50, Math.floor(100 * room / wide)) + "%";
      }
    });
  }
  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(fitFormulas);
    }
  }
  window.addEventListener("load", whenTypeset);
  window.addEventListener("resize", fitFormulas);
})();
