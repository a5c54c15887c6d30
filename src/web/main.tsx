/** The dashboard's entry point: styles, then the app in #app. */
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './app.js';

render(<App />, document.getElementById('app')!);
