import type Router from '@koa/router';
import { z } from 'zod';
import type { Config } from '../../config';
import { endpoint } from '../../http/endpoint';

const oauthConfig = z.object({ providers: z.array(z.string()) });
const deploymentConfig = z.object({
  signup: z.boolean(),
  billing: z.boolean(),
  oauth: oauthConfig,
  snsDeliveryEvents: z.boolean(),
  s3Uploads: z.boolean(),
  devMailbox: z.boolean().meta({ description: 'GET /dev/mailbox exists (no SMTP_URL: mail is captured locally)' }),
});

/**
 * What a dashboard needs to know before anyone signs in: which integrations this deployment has.
 * Billing is on with STRIPE_SECRET_KEY, S3 uploads with S3_BUCKET; OAuth sign-in is not built in this version.
 */
export function configRoutes(router: Router, config: Config): void {
  const oauthProviders: string[] = [];
  router.get(
    '/config',
    endpoint({ tag: 'Config', summary: 'Which integrations this deployment has', responses: { 200: deploymentConfig.describe('Feature flags') } }, (ctx) => {
      ctx.body = {
        signup: !config.DISABLE_SIGNUP,
        billing: Boolean(config.STRIPE_SECRET_KEY),
        oauth: { providers: oauthProviders },
        snsDeliveryEvents: true,
        s3Uploads: Boolean(config.S3_BUCKET),
        devMailbox: !config.SMTP_URL,
      };
    }),
  );
  router.get(
    '/auth/oauth-config',
    endpoint({ tag: 'Auth', summary: 'Which OAuth providers are configured', responses: { 200: oauthConfig.describe('None in this version') } }, (ctx) => {
      ctx.body = { providers: oauthProviders };
    }),
  );
}
