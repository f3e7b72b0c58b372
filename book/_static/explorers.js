// The site's explorers (inferlab/pages/explorers/site.py). Each .inferlab-explorer holds the
// Vega-Lite spec of its chart, with its data precomputed when the page was built; this
// draws it with vegaEmbed and greys out an input while it cannot change the figure (a
// control's only_when), or for good where the site offers one value of it (fixed).
//
// Nothing is drawn at load: when the first explorer comes near the window, the Vega
// bundle (explorers/vega.js beside this file, 0.9 MB) is loaded, and each explorer is
// drawn as it comes near. A reader who never scrolls there loads none of it, and the
// page's load is not held up by a few hundred milliseconds of script and drawing.
let vega;

function bundle() {
  vega ??= import(new URL("explorers/vega.js", import.meta.url).href);
  return vega;
}

async function draw(explorer) {
  await bundle();
  const spec = JSON.parse(explorer.querySelector("script.inferlab-explorer-spec").textContent);
  const target = explorer.querySelector(".inferlab-explorer-view");
  const { view } = await window.vegaEmbed(target, spec, { renderer: "svg", actions: false });
  for (const [param, [other, value]] of Object.entries(spec.usermeta.only_when)) {
    const inputs = target.querySelectorAll(`[name="${param}"]`);
    const grey = () => {
      for (const input of inputs) input.disabled = view.signal(other) !== value;
    };
    view.addSignalListener(other, grey);
    grey();
  }
  for (const param of spec.usermeta.fixed ?? []) {
    for (const input of target.querySelectorAll(`[name="${param}"]`)) {
      input.disabled = true;
      input.title = "fixed on this page; the notebook moves it";
    }
  }
}

const near = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) {
      near.unobserve(entry.target);
      draw(entry.target);
    }
  }
}, { rootMargin: "800px 0px" });
for (const explorer of document.querySelectorAll(".inferlab-explorer")) near.observe(explorer);
