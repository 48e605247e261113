import { decodeHTMLAttribute } from 'entities';
import type { Links } from './links';

const ANCHOR_HREF = /(<a\b[^>]*?\bhref\s*=\s*)(["'])(.*?)\2/gis;

const encodeAttr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');

/** Only web links are tracked; mailto:, tel:, anchors and the service's own links stay as they are. */
function trackable(url: string, links: Links): boolean {
  return (
    /^https?:\/\//i.test(url) &&
    !url.startsWith(links.publicUrl + '/unsubscribe/') &&
    !url.startsWith(links.publicUrl + '/manage/') &&
    !url.startsWith(links.publicUrl + '/subscribe/')
  );
}

/** Rewrites web links to signed click-tracking links (`clicks`) and adds the open pixel before `</body>` (`opens`). */
export function addTracking(html: string, emailId: string, links: Links, what: { opens: boolean; clicks: boolean }): string {
  if (!what.opens && !what.clicks) return html;
  const rewritten = !what.clicks
    ? html
    : html.replace(ANCHOR_HREF, (whole, prefix: string, quote: string, raw: string) => {
        // Decoded as a browser decodes an attribute (numeric and named references, the legacy rules),
        // so the click lands where a click on the original link would.
        const url = decodeHTMLAttribute(raw).trim();
        if (!trackable(url, links)) return whole;
        return `${prefix}"${encodeAttr(links.click(emailId, url))}"`;
      });
  if (!what.opens) return rewritten;
  const pixel = `<img src="${encodeAttr(links.openPixel(emailId))}" width="1" height="1" alt="" style="display:none;border:0" />`;
  return insertBeforeBodyEnd(rewritten, pixel);
}

export function insertBeforeBodyEnd(html: string, fragment: string): string {
  const at = html.search(/<\/body\s*>/i);
  return at === -1 ? html + fragment : html.slice(0, at) + fragment + html.slice(at);
}

/** The footer of MARKETING mail: the unsubscribe link, and the preference center where "unsubscribe from all" lives. */
export function unsubscribeFooter(unsubscribeUrl: string, manageUrl: string): string {
  return (
    '<div style="margin-top:24px;font-size:12px;color:#888;text-align:center">' +
    `You are receiving this email because you subscribed. <a href="${encodeAttr(unsubscribeUrl)}">Unsubscribe</a>` +
    ` · <a href="${encodeAttr(manageUrl)}">Manage preferences</a>` +
    '</div>'
  );
}
