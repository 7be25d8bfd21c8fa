/*
 * Sendstream website tracking (spec 4.7). Load with
 *   <script async src="{site_url}/track.js" data-site-id="ss_track_..."></script>
 * API: ICTrack.identify(email), ICTrack.track(name, properties),
 * ICTrack.goal(goalType, {value, currency, externalId, email, event}),
 * ICTrack.reset(). Calls made before the script loaded may be queued as
 * window.ICTrack = [["identify", "a@b.co"], ...] (ICTrack.push works
 * before and after load). Every call returns a
 * Promise of the HTTP status (0 when nothing was sent or the request
 * failed) and never throws.
 * The identified email lives in memory only: nothing persists between pages.
 * An anonymous page-view beacon is sent on load and on history navigation.
 * Served minified by ingest/tracking (comments and indentation removed).
 */
(function (w, d) {
  "use strict";
  var old = w.ICTrack;
  if (old && old.v) return;
  var me = d.currentScript || d.querySelector("script[data-site-id]");
  var token = me && me.getAttribute("data-site-id");
  var base = "";
  try { base = new URL(me.src, location.href).origin; } catch (e) {}
  var email = null;
  var lastPath = null;
  var P = w.Promise;
  function done(v) { return P ? P.resolve(v) : v; }
  function post(path, body, auth) {
    try {
      if (!token || !base) return done(0);
      var data = JSON.stringify(body);
      var url = base + path;
      if (!auth && navigator.sendBeacon) {
        return done(navigator.sendBeacon(url, data) ? 204 : 0);
      }
      var h = { "Content-Type": "text/plain" };
      if (auth) h.Authorization = "Bearer " + token;
      if (w.fetch) {
        return w.fetch(url, { method: "POST", mode: "cors", keepalive: true, credentials: "omit", headers: h, body: data })
          .then(function (r) { return r.status; }, function () { return 0; });
      }
      var x = new XMLHttpRequest();
      x.open("POST", url, true);
      for (var k in h) x.setRequestHeader(k, h[k]);
      x.send(data);
      return done(0);
    } catch (e) { return done(0); }
  }
  function event(body, who) {
    var e = who || email;
    if (e) body.email = e;
    return post("/api/public/events", body, true);
  }
  function safe(f) {
    return function () {
      try { return f.apply(null, arguments); } catch (e) { return done(0); }
    };
  }
  var api = {
    v: 1,
    identify: safe(function (e) {
      email = typeof e === "string" && e.indexOf("@") > 0 ? e.trim().toLowerCase() : null;
      return done(email ? 1 : 0);
    }),
    reset: safe(function () { email = null; return done(1); }),
    track: safe(function (name, props) {
      if (typeof name !== "string" || !name) return done(0);
      var b = { event: name };
      if (props && typeof props === "object") b.properties = props;
      return event(b);
    }),
    goal: safe(function (type, o) {
      if (typeof type !== "string" || !type) return done(0);
      o = o || {};
      var b = { event: String(o.event || type), goalType: type };
      if (o.value != null) b.value = Number(o.value);
      if (o.currency) b.currency = String(o.currency);
      if (o.externalId != null) b.externalId = String(o.externalId);
      if (o.properties && typeof o.properties === "object") b.properties = o.properties;
      return event(b, o.email);
    }),
    page: safe(function () {
      var p = location.pathname + location.search;
      if (p === lastPath) return done(0);
      lastPath = p;
      return post("/api/track/pageview", {
        s: token, u: location.href, r: d.referrer, t: d.title, w: (w.screen && screen.width) || 0
      }, false);
    })
  };
  // push runs a queued call, so the stub pattern keeps working after load.
  api.push = safe(function (c) { return api[c[0]].apply(null, c.slice(1)); });
  w.ICTrack = api;
  if (old && old.length) for (var i = 0; i < old.length; i++) api.push(old[i]);
  try {
    var hs = w.history, push = hs && hs.pushState;
    if (push) {
      hs.pushState = function () {
        var r = push.apply(hs, arguments);
        setTimeout(api.page, 0);
        return r;
      };
      w.addEventListener("popstate", function () { api.page(); });
    }
    if (d.readyState === "loading") d.addEventListener("DOMContentLoaded", function () { api.page(); });
    else api.page();
  } catch (e) {}
})(window, document);
