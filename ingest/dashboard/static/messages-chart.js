// The message log's chart (ingest/dashboard/message_log.html): reads the
// JSON data block #messages-chart-data ({days: [unix seconds], series:
// {status: [counts]}}) and draws one uPlot line per status. Loaded from
// /static under script-src 'self'; no inline script.
(function () {
	"use strict";
	var el = document.getElementById("messages-chart");
	var src = document.getElementById("messages-chart-data");
	if (!el || !src || typeof uPlot === "undefined") {
		return;
	}
	var d = JSON.parse(src.textContent);
	var colors = {queued: "#888", sent: "#1f77b4", delivered: "#2ca02c", bounced: "#d62728", complained: "#ff7f0e", failed: "#9467bd"};
	var series = [{}];
	var data = [d.days];
	Object.keys(d.series).forEach(function (status) {
		series.push({label: status, stroke: colors[status] || "#000", width: 2});
		data.push(d.series[status]);
	});
	var width = Math.min(el.parentElement.clientWidth || 800, 896);
	el.dataset.drawn = "true";
	new uPlot({width: width, height: 220, series: series, scales: {x: {time: true}},
		axes: [{}, {label: "messages"}]}, data, el);
})();
