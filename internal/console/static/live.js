// live.js: the live update of the Now page. When the server's event stream
// says the alarms changed, fetch the rows for the page's filters and swap
// the table's body and the count. No framework, no inline script: the
// page's Content-Security-Policy allows scripts and connections to its own
// origin only. Without JavaScript the page works as is (reload it).
(function () {
  "use strict";
  var table = document.getElementById("now-table");
  if (!table || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;

  // openDetails returns the ids of the rows whose delivery details are open.
  function openDetails() {
    var ids = [];
    document.querySelectorAll("#alarms tr[id] details[open]").forEach(function (d) {
      ids.push(d.closest("tr").id);
    });
    return ids;
  }

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var body = doc.getElementById("alarms");
    var count = doc.getElementById("count");
    var oldBody = document.getElementById("alarms");
    var oldCount = document.getElementById("count");
    if (!body || !count || !oldBody || !oldCount) {
      return;
    }
    var open = openDetails();
    oldBody.replaceWith(document.adoptNode(body));
    oldCount.replaceWith(document.adoptNode(count));
    open.forEach(function (id) {
      var row = document.getElementById(id);
      var d = row && row.querySelector("details");
      if (d) {
        d.open = true;
      }
    });
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(table.dataset.rows, { credentials: "same-origin", cache: "no-store" })
      .then(function (resp) {
        if (resp.status === 403) {
          location.reload(); // logged out: the page goes to the login form
          return null;
        }
        return resp.ok ? resp.text() : null;
      })
      .then(function (html) {
        if (html !== null) {
          swap(html);
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var source = new EventSource(table.dataset.events);
  source.addEventListener("alarms", refresh);
  source.addEventListener("ended", function () {
    // The session ended (a logout in another tab, or its expiry): stop the
    // stream, and reload to the login form.
    source.close();
    location.reload();
  });
  source.addEventListener("error", function () {
    // A stream the server refused (logged out) is not retried: reload,
    // which goes to the login form if the session is gone.
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(function () { location.reload(); }, 5000);
    }
  });
})();
