import { allSearchAttributes } from '@temporalio/ui/stores/search-attributes';
import { fetchSearchAttributesForNamespace } from '@temporalio/ui/services/search-attributes-service';

export async function load({ params, fetch }) {
  allSearchAttributes.set(await fetchSearchAttributesForNamespace(params.namespace, fetch));
}
