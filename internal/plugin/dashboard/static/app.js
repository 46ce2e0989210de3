// kubectl app dashboard: follows the server's event streams and swaps in the HTML the
// server renders; filters the list; asks before each action and shows its outcome.
// No framework, no build step, no request to anything but this server.
'use strict';

(function () {
  const body = document.body;
  const live = document.getElementById('live');

  // stream opens the event stream at path and calls handlers[event](data).
  function stream(path, handlers) {
    const source = new EventSource(path);
    source.onopen = function () { live.textContent = 'live'; live.className = 'live on'; };
    source.onerror = function () { live.textContent = 'reconnecting…'; live.className = 'live off'; };
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (e) { handlers[name](JSON.parse(e.data)); });
    });
    return source;
  }

  // fromHTML returns the element of a rendered table row.
  function rowFromHTML(html) {
    const t = document.createElement('tbody');
    t.innerHTML = html;
    return t.firstElementChild;
  }

  function listPage() {
    const rows = document.getElementById('rows');
    const search = document.getElementById('search');
    const namespace = document.getElementById('namespace');
    const state = document.getElementById('state');
    const count = document.getElementById('count');
    const namespaces = new Set();

    function matches(row, words, ns, st) {
      if (ns && row.dataset.namespace !== ns) return false;
      if (st && row.dataset.state !== st) return false;
      const text = row.dataset.search;
      for (const w of words) if (text.indexOf(w) < 0) return false;
      return true;
    }

    function filter() {
      const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      const ns = namespace.value, st = state.value;
      let shown = 0, total = 0;
      for (const row of rows.rows) {
        total++;
        const show = matches(row, words, ns, st);
        row.hidden = !show;
        if (show) shown++;
      }
      count.textContent = shown === total ? total + ' Apps' : shown + ' of ' + total + ' Apps';
    }

    function addNamespace(ns) {
      if (namespaces.has(ns)) return;
      namespaces.add(ns);
      const opts = Array.from(namespaces).sort();
      const selected = namespace.value;
      namespace.length = 1;
      for (const n of opts) namespace.add(new Option(n, n, false, n === selected));
    }

    // place inserts row in key order, or replaces the row of the same key.
    function place(row) {
      const old = document.getElementById(row.id);
      if (old) { old.replaceWith(row); return; }
      const key = row.dataset.key;
      let before = null;
      for (const r of rows.rows) if (r.dataset.key > key) { before = r; break; }
      rows.insertBefore(row, before);
    }

    stream('/events/list', {
      rows: function (u) {
        if (u.snapshot) {
          const html = (u.rows || []).map(function (r) { return r.html; }).join('');
          rows.innerHTML = html;
          for (const r of rows.rows) addNamespace(r.dataset.namespace);
          filter();
          void rows.offsetHeight; // lay the rows out before the mark
          performance.mark('app-list-rendered');
          body.dataset.rows = String(rows.rows.length);
          return;
        }
        for (const r of (u.rows || [])) {
          const row = rowFromHTML(r.html);
          place(row);
          addNamespace(row.dataset.namespace);
        }
        for (const key of (u.remove || [])) {
          const old = document.getElementById('row-' + key);
          if (old) old.remove();
        }
        filter();
      }
    });
    search.addEventListener('input', filter);
    namespace.addEventListener('change', filter);
    state.addEventListener('change', filter);
    document.getElementById('filters').addEventListener('submit', function (e) { e.preventDefault(); });
  }

  function appPage() {
    const ns = body.dataset.namespace, name = body.dataset.name;
    const detail = document.getElementById('detail');
    const tree = document.getElementById('tree');
    const result = document.getElementById('result');
    const dialog = document.getElementById('confirm');
    const confirmText = document.getElementById('confirm-text');
    let pending = null;

    // swap replaces the content of el, keeping the focus on the element of the same id.
    function swap(el, html) {
      const focused = document.activeElement && el.contains(document.activeElement) ? document.activeElement.id : '';
      el.innerHTML = html;
      if (focused) {
        const again = document.getElementById(focused);
        if (again) again.focus();
      }
    }

    function show(text, error) {
      result.textContent = text;
      result.className = error ? 'error' : 'ok';
    }

    function act(button) {
      const form = new URLSearchParams();
      form.set('action', button.dataset.action);
      if (button.dataset.revision) form.set('revision', button.dataset.revision);
      show('Sending…', false);
      fetch('/apps/' + encodeURIComponent(ns) + '/' + encodeURIComponent(name) + '/actions', {
        method: 'POST', body: form, credentials: 'same-origin',
        headers: { 'X-Requested-By': 'kubectl-app-dashboard' }
      }).then(function (resp) { return resp.json(); })
        .then(function (r) { if (r.error) show(r.error, true); else show(r.message, false); })
        .catch(function (err) { show('error: ' + err, true); });
    }

    document.addEventListener('click', function (e) {
      const button = e.target.closest('button[data-action]');
      if (!button || button.disabled) return;
      pending = button;
      confirmText.textContent = button.dataset.confirm;
      dialog.showModal();
      document.getElementById('confirm-cancel').focus();
    });
    dialog.addEventListener('close', function () {
      const button = pending;
      pending = null;
      if (dialog.returnValue === 'ok' && button) act(button);
      if (button && document.getElementById(button.id)) document.getElementById(button.id).focus();
    });

    stream('/events/apps/' + encodeURIComponent(ns) + '/' + encodeURIComponent(name), {
      detail: function (html) { swap(detail, html); },
      tree: function (html) { swap(tree, html); },
      gone: function (msg) { show(msg, true); }
    });
  }

  if (body.dataset.page === 'list') listPage();
  if (body.dataset.page === 'app') appPage();
})();
