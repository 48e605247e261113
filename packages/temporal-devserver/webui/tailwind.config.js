// Tailwind with the UI library's own theme preset; its classes live in the library's compiled components.
// (Loaded through Tailwind's jiti, which resolves the preset's extensionless imports.)
import preset from './node_modules/@temporalio/ui/dist/theme/preset.js';

export default {
  presets: [preset],
  content: ['./src/**/*.{html,js,svelte}', './node_modules/@temporalio/ui/dist/**/*.{js,svelte}'],
  darkMode: 'class',
};
