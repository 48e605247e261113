import { z } from 'zod';
import { sameShape } from '../../http/responses';
import type { storeImage } from './uploads.service';

export const storedImageResponse = z.object({
  id: z.string(),
  url: z.string().meta({ description: 'Public: usable in template bodies and sent mail' }),
  contentType: z.enum(['image/png', 'image/jpeg', 'image/gif', 'image/webp']),
  size: z.number().int().meta({ description: 'Bytes' }),
});
sameShape<z.output<typeof storedImageResponse>, Awaited<ReturnType<typeof storeImage>>>(true);

/** GET /uploads/:projectId/:name: the parts of a URL answered by POST /uploads/image. */
export const storedImageParams = {
  projectId: z.string().meta({ description: 'The project’s id' }),
  name: z.string().meta({ description: 'The stored file’s name: <uuid>.<png|jpg|gif|webp>' }),
};
