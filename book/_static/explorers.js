// The site's explorers (inferlab/explorers/site.py). Each .inferlab-explorer holds the
// Vega-Lite spec of its chart, with its data precomputed when the page was built; this
// draws it with vegaEmbed (from _static/explorers/vega.js, loaded before this) and greys
// out an input while it cannot change the figure (a control's only_when).
for (const explorer of document.querySelectorAll(".inferlab-explorer")) {
  const spec = JSON.parse(explorer.querySelector("script.inferlab-explorer-spec").textContent);
  const target = explorer.querySelector(".inferlab-explorer-view");
  window.vegaEmbed(target, spec, { renderer: "svg", actions: false }).then(({ view }) => {
    for (const [param, [other, value]] of Object.entries(spec.usermeta.only_when)) {
      const inputs = target.querySelectorAll(`[name="${param}"]`);
      const grey = () => {
        for (const input of inputs) input.disabled = view.signal(other) !== value;
      };
      view.addSignalListener(other, grey);
      grey();
    }
  });
}
