import type { Context } from 'koa';
import { queryValue } from './validate';

const MAX_PAGE_SIZE = 100;

/** `page` (default 1, at least 1) and `pageSize` (default 20, 1-100); unusable values fall back to the defaults. */
export function pageParams(ctx: Context): { page: number; pageSize: number } {
  const page = Number.parseInt(queryValue(ctx, 'page') ?? '', 10);
  const size = Number.parseInt(queryValue(ctx, 'pageSize') ?? '', 10);
  return {
    page: Number.isFinite(page) && page >= 1 ? page : 1,
    pageSize: Number.isFinite(size) && size >= 1 ? Math.min(size, MAX_PAGE_SIZE) : 20,
  };
}

/** `sort` among the allowed columns (else the default) and `dir` asc|desc (else desc). */
export function sortParams<C extends Record<string, string>>(ctx: Context, columns: C, fallback: keyof C) {
  const sort = queryValue(ctx, 'sort');
  const dir = queryValue(ctx, 'dir')?.toLowerCase();
  return {
    sort: columns[sort && Object.prototype.hasOwnProperty.call(columns, sort) ? (sort as keyof C) : fallback],
    dir: (dir === 'asc' ? 'ASC' : 'DESC') as 'ASC' | 'DESC',
  };
}
