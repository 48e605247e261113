import { redirect } from '@sveltejs/kit';

export async function load({ parent }) {
  const { settings } = await parent();
  redirect(307, `/namespaces/${settings.defaultNamespace}/workflows`);
}
