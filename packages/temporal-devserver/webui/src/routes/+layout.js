// Client-only: settings, cluster and system info come from the dev server's /api/v1 before any page renders.
import i18next from 'i18next';
import Locales from '@temporalio/ui/i18n/locales/index';
import { i18nNamespaces } from '@temporalio/ui/i18n/index';
import { fetchSettings } from '@temporalio/ui/services/settings-service';
import { fetchCluster, fetchSystemInfo } from '@temporalio/ui/services/cluster-service';
import { fetchNamespaces } from '@temporalio/ui/services/namespaces-service';

export const ssr = false;
export const prerender = false;

let i18nReady;

export async function load({ fetch }) {
  i18nReady ??= i18next.init({ lng: 'en', fallbackLng: 'en', ns: i18nNamespaces, resources: Locales, interpolation: { escapeValue: false } });
  await i18nReady;
  const settings = await fetchSettings(fetch);
  const [cluster, systemInfo] = await Promise.all([fetchCluster(settings, fetch), fetchSystemInfo(settings, fetch)]);
  await fetchNamespaces(settings, fetch);
  return { settings, cluster, systemInfo };
}
