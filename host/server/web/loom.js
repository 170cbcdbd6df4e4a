// What the chat page and the engine page share, served once as /assets/loom.js and loaded before each
// page's own script: the error banner, the API-key prompt, and fetch with the key attached. It all
// hangs off the one global `loom`, so a page's own names cannot clash with it.
'use strict';

const loom = (() => {
  const API_KEY_STORAGE = 'loom.apiKey';

  // The same markup on both pages: the banner right under the top bar, the dialog at the end of the body.
  document.querySelector('.topbar').insertAdjacentHTML('afterend', `
<div id="error-banner" class="banner error" role="alert" hidden>
  <span class="banner-text"></span>
  <button type="button" class="dismiss" aria-label="Dismiss error">✕</button>
</div>`);
  document.body.insertAdjacentHTML('beforeend', `
<dialog id="api-key-dialog" aria-labelledby="api-key-title">
  <form id="api-key-form">
    <h2 id="api-key-title">API key required</h2>
    <p>This server asks for an API key. It is kept for this browser tab only.</p>
    <label for="api-key-input">API key</label>
    <input id="api-key-input" type="text" autocomplete="off" spellcheck="false">
    <div class="dialog-actions"><button type="submit" id="api-key-save" class="primary">Save</button></div>
  </form>
</dialog>`);

  const errorBanner = document.getElementById('error-banner');
  const errorText = errorBanner.querySelector('.banner-text');
  const keyDialog = document.getElementById('api-key-dialog');
  const keyInput = document.getElementById('api-key-input');
  let afterKeySaved = () => {};

  // ---------- error banner ----------

  function showError(message) {
    errorText.textContent = message;
    errorBanner.hidden = false;
  }

  function hideError() {
    errorBanner.hidden = true;
  }

  // ---------- API key ----------

  function storedApiKey() {
    try {
      return sessionStorage.getItem(API_KEY_STORAGE) || '';
    } catch {
      return '';
    }
  }

  function promptForApiKey() {
    if (keyDialog.open) return;
    keyInput.value = storedApiKey();
    keyDialog.showModal();
    keyInput.focus();
  }

  function saveApiKey(event) {
    event.preventDefault();
    const key = keyInput.value.trim();
    if (!key) {
      keyInput.focus();
      return;
    }
    try {
      sessionStorage.setItem(API_KEY_STORAGE, key);
    } catch (error) {
      showError(`Could not keep the API key: ${error.message}`);
    }
    keyDialog.close();
    afterKeySaved();
  }

  // ---------- API access ----------

  class ApiError extends Error {
    constructor(message, status) {
      super(message);
      this.name = 'ApiError';
      this.status = status;
    }
  }

  async function errorMessageOf(response) {
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) return String(body.error.message);
    } catch {
      // not JSON: fall through to the status line
    }
    return `HTTP ${response.status} ${response.statusText}`.trim();
  }

  // fetch with the API key attached; a non-2xx answer becomes an ApiError carrying the server's
  // message, and a 401 also asks for the key.
  async function apiFetch(path, options = {}) {
    const headers = new Headers(options.headers);
    const key = storedApiKey();
    if (key) headers.set('Authorization', `Bearer ${key}`);
    let response;
    try {
      response = await fetch(path, { ...options, headers });
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      throw new Error(`Cannot reach the server: ${error.message}`);
    }
    if (response.ok) return response;
    const message = await errorMessageOf(response);
    if (response.status === 401) promptForApiKey();
    throw new ApiError(message, response.status);
  }

  errorBanner.querySelector('.dismiss').addEventListener('click', hideError);
  document.getElementById('api-key-form').addEventListener('submit', saveApiKey);
  // The pages are useless without a key, so Escape does not dismiss the prompt.
  keyDialog.addEventListener('cancel', (event) => event.preventDefault());

  return {
    ApiError,
    apiFetch,
    showError,
    // callback() runs once a key is saved: the page retries what the 401 stopped.
    afterApiKeySaved(callback) { afterKeySaved = callback; },
  };
})();
