// A client-only single-page app: every path falls back to index.html, served next to /api/v1 by the dev server.
import adapter from '@sveltejs/adapter-static';

export default {
  kit: {
    adapter: adapter({ pages: 'build', assets: 'build', fallback: 'index.html', strict: false }),
    // The app is served from the root of its own port.
    paths: { relative: false },
  },
};
