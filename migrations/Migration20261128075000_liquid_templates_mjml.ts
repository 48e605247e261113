import { Migration } from '@mikro-orm/migrations';

export class Migration20261128075000_liquid_templates_mjml extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "templates" add column "format" text check ("format" in ('html', 'mjml')) not null default 'html', add column "body_html" text null;`,
    );

    this.addSql(
      `alter table "campaigns" add column "format" text check ("format" in ('html', 'mjml')) not null default 'html', add column "body_html" text null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "campaigns" drop column "format", drop column "body_html";`);

    this.addSql(`alter table "templates" drop column "format", drop column "body_html";`);
  }
}
